package engine

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Replication is the replication side of a benchmark cell: started against
// the cell's master store after it opens, stopped before it closes. The
// master's storehost.Host receives ReportReplication calls, so acks and
// visibility follow Policy exactly as in the host process.
//
// Policy may be called at any time, before Start too; Start is called
// once; Stop
// once, after the producers stopped, returning when every goroutine (and
// any slave store) is gone.
type Replication interface {
	Start(ctx context.Context, master *storehost.Host, env ReplEnv) error
	Policy() sdk.ReplicationPolicy
	Stop(ctx context.Context) error
}

// ReplEnv is what a Replication may use.
type ReplEnv struct {
	// SlaveDir is a directory (created by the Replication) for a slave
	// store on the same disk; StateDir an existing empty directory for the
	// replication's own files (plugins' DataDir).
	SlaveDir    string
	StateDir    string
	SegmentSize int64
	Logger      *slog.Logger
}

// ReplicationFactory makes a fresh Replication for one run; env is the
// same as Start will get.
type ReplicationFactory func(env ReplEnv) (Replication, error)

// ReplImpl is a registered replication implementation.
type ReplImpl struct {
	New  ReplicationFactory
	Impl string // "emulated" or "plugin"
}

var replReg = map[[2]string]ReplImpl{}

// RegisterReplication makes name (a replication axis value other than
// "none") in mode run with f; a later registration replaces an earlier one.
func RegisterReplication(name, mode, impl string, f ReplicationFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	replReg[[2]string{name, mode}] = ReplImpl{New: f, Impl: impl}
}

// LookupReplication returns the registered implementation.
func LookupReplication(name, mode string) (ReplImpl, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	r, ok := replReg[[2]string{name, mode}]
	return r, ok
}

func init() {
	RegisterReplication("async", "builtin", "emulated", func(ReplEnv) (Replication, error) { return NewMasterSlave(false, 3*time.Second), nil })
	RegisterReplication("sync", "builtin", "emulated", func(ReplEnv) (Replication, error) { return NewMasterSlave(true, 3*time.Second), nil })
}

// MasterSlave emulates RocketMQ master/slave HA in one process: a slave
// store in ReplEnv.SlaveDir, fed over a TCP connection on 127.0.0.1 with
// the master's committed log bytes (Host.ReadLog → Store.AppendRaw at the
// same offsets); the slave acknowledges each chunk once appended (received,
// not flushed: RocketMQ SYNC_MASTER semantics) and the master reports the
// acknowledged offset with Host.ReportReplication. The slave flushes every
// 500 ms and dispatches its own consume queues. With sync set, acks wait
// for the slave (FLUSH_SLAVE_TIMEOUT after timeout).
type MasterSlave struct {
	sync    bool
	timeout time.Duration

	slave  *core.Store
	ln     net.Listener
	conns  []net.Conn
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
}

// NewMasterSlave returns the emulation; sync selects SYNC_MASTER acks.
func NewMasterSlave(sync bool, timeout time.Duration) *MasterSlave {
	return &MasterSlave{sync: sync, timeout: timeout}
}

// Policy implements Replication.
func (m *MasterSlave) Policy() sdk.ReplicationPolicy {
	if !m.sync {
		return sdk.ReplicationPolicy{}
	}
	return sdk.ReplicationPolicy{WaitReplicas: 1, Timeout: m.timeout}
}

const frameHeader = 12 // offset int64 + length uint32

// Start implements Replication.
func (m *MasterSlave) Start(ctx context.Context, master *storehost.Host, env ReplEnv) error {
	slave, err := core.Open(core.Options{Dir: env.SlaveDir, SegmentSize: env.SegmentSize, Logger: env.Logger, Retention: Retention,
		MaxMessageSize: MaxMessageSize(env.SegmentSize),
		FlushInterval:  500 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("open slave store: %w", err)
	}
	m.slave = slave
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		slave.Close()
		return fmt.Errorf("listen for the slave link: %w", err)
	}
	m.ln = ln
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	mc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		m.Stop(ctx)
		return fmt.Errorf("dial the slave link: %w", err)
	}
	sc, ok := <-accepted
	if !ok {
		mc.Close()
		m.Stop(ctx)
		return errors.New("slave link: accept failed")
	}
	m.mu.Lock()
	m.conns = append(m.conns, mc, sc)
	m.mu.Unlock()

	p, err := master.Positions(ctx)
	if err != nil {
		m.Stop(ctx)
		return err
	}
	start := p.Min
	state := func(acked int64) sdk.ReplicationState {
		return sdk.ReplicationState{AckedOffset: acked, InSync: 1, Replicas: []sdk.ReplicaState{{
			ID: "slave-1", Addr: sc.LocalAddr().String(), AckOffset: acked, InSync: true, Connected: true, LastContact: time.Now()}}}
	}
	if err := master.ReportReplication(ctx, state(start)); err != nil {
		m.Stop(ctx)
		return err
	}
	run := func(name string, f func() error) {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				m.errMu.Lock()
				m.err = errors.Join(m.err, fmt.Errorf("%s: %w", name, err))
				m.errMu.Unlock()
			}
		}()
	}
	// master → slave: committed bytes.
	run("replication sender", func() error {
		w := bufio.NewWriterSize(mc, 256<<10)
		pos := start
		var hdr [frameHeader]byte
		for {
			data, err := master.ReadLog(ctx, pos, 256<<10)
			if err != nil {
				return err
			}
			if len(data) == 0 {
				if err := w.Flush(); err != nil {
					return err
				}
				if _, err := master.WaitCommitted(ctx, pos); err != nil {
					return err
				}
				continue
			}
			binary.BigEndian.PutUint64(hdr[:8], uint64(pos))
			binary.BigEndian.PutUint32(hdr[8:], uint32(len(data)))
			w.Write(hdr[:])
			if _, err := w.Write(data); err != nil {
				return err
			}
			pos += int64(len(data))
		}
	})
	// slave: append and acknowledge.
	run("slave", func() error {
		r := bufio.NewReaderSize(sc, 256<<10)
		var hdr [frameHeader]byte
		var ack [8]byte
		buf := make([]byte, 0, 256<<10)
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return err
			}
			off := int64(binary.BigEndian.Uint64(hdr[:8]))
			n := int(binary.BigEndian.Uint32(hdr[8:]))
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, err := io.ReadFull(r, buf); err != nil {
				return err
			}
			if err := slave.AppendRaw(off, buf); err != nil {
				return err
			}
			// Acknowledge only when nothing more is waiting: the ack is
			// cumulative, like RocketMQ's slave offset report.
			if r.Buffered() >= frameHeader {
				continue
			}
			binary.BigEndian.PutUint64(ack[:], uint64(off+int64(n)))
			if _, err := sc.Write(ack[:]); err != nil {
				return err
			}
		}
	})
	// master: acknowledged offsets.
	run("ack reader", func() error {
		var ack [8]byte
		for {
			if _, err := io.ReadFull(mc, ack[:]); err != nil {
				return err
			}
			if err := master.ReportReplication(ctx, state(int64(binary.BigEndian.Uint64(ack[:])))); err != nil {
				return err
			}
		}
	})
	return nil
}

// Stop implements Replication.
func (m *MasterSlave) Stop(ctx context.Context) error {
	if m.cancel != nil {
		m.cancel()
	}
	if m.ln != nil {
		m.ln.Close()
	}
	m.mu.Lock()
	for _, c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
	var err error
	if m.slave != nil {
		err = m.slave.Close()
	}
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return errors.Join(m.err, err)
}
