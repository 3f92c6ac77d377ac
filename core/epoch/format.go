package epoch

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// ErrCorrupt is wrapped by every error about an epoch file whose content is
// not a valid history (bad syntax, CRC mismatch, count mismatch, or entries
// breaking the ordering rules).
var ErrCorrupt = errors.New("corrupt epoch file")

// maxEntries bounds the count line so a corrupt file cannot make Parse
// allocate without limit.
const maxEntries = 1 << 20

// checksum is RocketMQ's CRC32: IEEE CRC32 masked with 0x7FFFFFFF.
func checksum(b []byte) uint32 { return crc32.ChecksumIEEE(b) & 0x7FFFFFFF }

// Marshal encodes entries in the epoch file format (like RocketMQ's
// epochFileCheckpoint):
//
//	line 1: the number of entries, decimal
//	line 2: the checksum of everything after line 2, decimal: IEEE CRC32
//	        masked with 0x7FFFFFFF
//	then one "<epoch>-<startOffset>\n" line per entry, oldest first
//
// Every line ends with '\n'. An empty history is "0\n0\n". Marshal does not
// validate; Parse(Marshal(h)) returns h for every valid history h.
func Marshal(entries []Entry) []byte {
	var body []byte
	for _, e := range entries {
		body = strconv.AppendInt(body, int64(e.Epoch), 10)
		body = append(body, '-')
		body = strconv.AppendInt(body, e.StartOffset, 10)
		body = append(body, '\n')
	}
	out := strconv.AppendInt(nil, int64(len(entries)), 10)
	out = append(out, '\n')
	out = strconv.AppendUint(out, uint64(checksum(body)), 10)
	out = append(out, '\n')
	return append(out, body...)
}

// Parse decodes the format Marshal writes and checks the result with
// Validate. It accepts exactly Marshal's canonical output: no blank lines,
// no missing final newline, no signs or leading zeros in numbers other than
// "0". Errors wrap ErrCorrupt and say which line is wrong.
func Parse(data []byte) ([]Entry, error) {
	countLine, rest, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return nil, fmt.Errorf("%w: line 1 (entry count) is not terminated", ErrCorrupt)
	}
	count, err := parseUint(countLine, maxEntries)
	if err != nil {
		return nil, fmt.Errorf("%w: line 1 (entry count) %q: %v", ErrCorrupt, countLine, err)
	}
	crcLine, body, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return nil, fmt.Errorf("%w: line 2 (checksum) is not terminated", ErrCorrupt)
	}
	crc, err := parseUint(crcLine, 0x7FFFFFFF)
	if err != nil {
		return nil, fmt.Errorf("%w: line 2 (checksum) %q: %v", ErrCorrupt, crcLine, err)
	}
	if got := checksum(body); uint64(got) != crc {
		return nil, fmt.Errorf("%w: checksum of the %d bytes of entries is %d, file says %d", ErrCorrupt, len(body), got, crc)
	}
	entries := make([]Entry, 0, min(count, uint64(len(body)/4+1)))
	line := 3
	for len(body) > 0 {
		var l []byte
		l, body, ok = bytes.Cut(body, []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("%w: line %d is not terminated", ErrCorrupt, line)
		}
		es, ss, ok := bytes.Cut(l, []byte{'-'})
		if !ok {
			return nil, fmt.Errorf("%w: line %d %q is not <epoch>-<startOffset>", ErrCorrupt, line, l)
		}
		ep, err := parseUint(es, 1<<31-1)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: epoch %q: %v", ErrCorrupt, line, es, err)
		}
		so, err := parseUint(ss, 1<<63-1)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: start offset %q: %v", ErrCorrupt, line, ss, err)
		}
		entries = append(entries, Entry{Epoch: int32(ep), StartOffset: int64(so)})
		line++
	}
	if uint64(len(entries)) != count {
		return nil, fmt.Errorf("%w: line 1 says %d entries, file has %d", ErrCorrupt, count, len(entries))
	}
	if err := Validate(entries); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return entries, nil
}

// parseUint parses a canonical decimal number no larger than max.
func parseUint(b []byte, max uint64) (uint64, error) {
	if len(b) == 0 {
		return 0, errors.New("empty number")
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, errors.New("leading zero")
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("non-digit %q", c)
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, fmt.Errorf("larger than %d", max)
		}
		n = n*10 + d
	}
	return n, nil
}
