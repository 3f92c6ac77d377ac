package timer

import (
	"encoding/binary"
	"hash/crc32"
)

// A unit is one timer in the timer log: 40 bytes, little endian,
//
//	magic u32 | crc u32 | prev i64 | due i64 | phys i64 | size i32 | reserved u32
//
// where crc is the CRC-32 (IEEE) of bytes 8 to 40, prev the log position
// of the previous unit of the same slot (-1: none), due the due time in
// epoch milliseconds, and phys and size the commitlog offset and size of
// the timer record.
type unit struct {
	prev int64
	due  int64
	phys int64
	size int32
}

const (
	unitSize  = 40
	unitMagic = 0x4b544d31 // "KTM1"
)

func (u unit) encode(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], unitMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(u.prev))
	binary.LittleEndian.PutUint64(b[16:], uint64(u.due))
	binary.LittleEndian.PutUint64(b[24:], uint64(u.phys))
	binary.LittleEndian.PutUint32(b[32:], uint32(u.size))
	binary.LittleEndian.PutUint32(b[36:], 0)
	binary.LittleEndian.PutUint32(b[4:], crc32.ChecksumIEEE(b[8:unitSize]))
}

// decodeUnit reports false for bytes that are not a whole unit.
func decodeUnit(b []byte) (unit, bool) {
	if len(b) < unitSize || binary.LittleEndian.Uint32(b[0:]) != unitMagic ||
		binary.LittleEndian.Uint32(b[4:]) != crc32.ChecksumIEEE(b[8:unitSize]) {
		return unit{}, false
	}
	return unit{
		prev: int64(binary.LittleEndian.Uint64(b[8:])),
		due:  int64(binary.LittleEndian.Uint64(b[16:])),
		phys: int64(binary.LittleEndian.Uint64(b[24:])),
		size: int32(binary.LittleEndian.Uint32(b[32:])),
	}, true
}

// A slot is one tick of the wheel: 32 bytes, little endian,
//
//	tick i64 | first i64 | last i64 | num i32 | crc u32
//
// where tick is the slot's time divided by the precision, first and last
// the log positions of its oldest and newest unit, num its unit count and
// crc the CRC-32 (IEEE) of bytes 0 to 28. A slot whose crc does not match
// (zeros, say) is empty; so is one whose tick is not the one looked for.
type slot struct {
	tick, first, last int64
	num               int32
}

const slotSize = 32

// empty is the slot of tick with no units.
func emptySlot(tick int64) slot { return slot{tick: tick, first: -1, last: -1} }

func (s slot) encode(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(s.tick))
	binary.LittleEndian.PutUint64(b[8:], uint64(s.first))
	binary.LittleEndian.PutUint64(b[16:], uint64(s.last))
	binary.LittleEndian.PutUint32(b[24:], uint32(s.num))
	binary.LittleEndian.PutUint32(b[28:], crc32.ChecksumIEEE(b[:28]))
}

func decodeSlot(b []byte) (slot, bool) {
	if binary.LittleEndian.Uint32(b[28:]) != crc32.ChecksumIEEE(b[:28]) {
		return slot{}, false
	}
	return slot{
		tick:  int64(binary.LittleEndian.Uint64(b[0:])),
		first: int64(binary.LittleEndian.Uint64(b[8:])),
		last:  int64(binary.LittleEndian.Uint64(b[16:])),
		num:   int32(binary.LittleEndian.Uint32(b[24:])),
	}, true
}
