package namesrv

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// Header field names of the requests this package speaks (RocketMQ's
// RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader,
// QueryDataVersionRequestHeader and their responses).
const (
	hdrBrokerName       = "brokerName"
	hdrBrokerAddr       = "brokerAddr"
	hdrClusterName      = "clusterName"
	hdrHAServerAddr     = "haServerAddr"
	hdrBrokerID         = "brokerId"
	hdrHeartbeatTimeout = "heartbeatTimeoutMillis"
	hdrActingMaster     = "enableActingMaster"
	hdrCompressed       = "compressed"
	hdrBodyCRC32        = "bodyCrc32"
	hdrMasterAddr       = "masterAddr"
	hdrChanged          = "changed"
	hdrTopic            = "topic"
)

// fields reads a request's header fields, keeping the first error. A
// field RocketMQ marks @CFNotNull must be present; required also refuses
// an empty value, present accepts one.
type fields struct {
	cmd *remoting.Command
	err error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
}

func (f *fields) required(k string) string {
	v, ok := f.cmd.ExtFields.Get(k)
	if !ok || v == "" {
		f.fail("header field %s is missing", k)
	}
	return v
}

func (f *fields) present(k string) string {
	v, ok := f.cmd.ExtFields.Get(k)
	if !ok {
		f.fail("header field %s is missing", k)
	}
	return v
}

// int returns field k as an integer of bits bits; absent or empty gives
// def, unless need is set.
func (f *fields) int(k string, bits int, def int64, need bool) int64 {
	v, ok := f.cmd.ExtFields.Get(k)
	if !ok || v == "" {
		if need {
			f.fail("header field %s is missing", k)
		}
		return def
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		f.fail("header field %s=%q is not an int%d", k, v, bits)
		return def
	}
	return n
}

// bool returns field k as Java's Boolean.parseBoolean does: true only for
// "true" in any case.
func (f *fields) bool(k string) bool {
	v, _ := f.cmd.ExtFields.Get(k)
	return strings.EqualFold(v, "true")
}

// bodyCRC32 is RocketMQ's UtilAll.crc32: the IEEE CRC32 of b with the top
// bit cleared, so it fits a positive Java int.
func bodyCRC32(b []byte) int64 { return int64(crc32.ChecksumIEEE(b) & 0x7FFFFFFF) }

// errCRCMismatch is RocketMQ's remark for a REGISTER_BROKER body whose
// checksum does not match (DefaultRequestProcessor.checksum); the handler
// answers it verbatim.
var errCRCMismatch = errors.New("crc32 not match")

// decodeRegister decodes a REGISTER_BROKER request, header and body. A
// non-zero bodyCrc32 must match the body; the body is decoded in the form
// the compressed header names. The result is not validated yet (the
// registry's entry point does it for both paths). Errors wrap ErrInvalid;
// a checksum mismatch also wraps errCRCMismatch.
func decodeRegister(cmd *remoting.Command) (Registration, error) {
	f := fields{cmd: cmd}
	reg := Registration{
		BrokerName:   f.required(hdrBrokerName),
		BrokerAddr:   f.required(hdrBrokerAddr),
		Cluster:      f.required(hdrClusterName),
		HAServerAddr: f.present(hdrHAServerAddr),
		BrokerID:     f.int(hdrBrokerID, 64, 0, true),
	}
	timeout := f.int(hdrHeartbeatTimeout, 64, 0, false)
	crc := f.int(hdrBodyCRC32, 32, 0, false)
	compressed := f.bool(hdrCompressed)
	if f.err != nil {
		return Registration{}, fmt.Errorf("decoding REGISTER_BROKER header: %w", f.err)
	}
	if timeout < 0 || timeout > int64(time.Duration(1<<62)/time.Millisecond) {
		return Registration{}, fmt.Errorf("decoding REGISTER_BROKER header: %w: heartbeatTimeoutMillis %d out of range", ErrInvalid, timeout)
	}
	reg.HeartbeatTimeout = time.Duration(timeout) * time.Millisecond
	if crc != 0 && bodyCRC32(cmd.Body) != crc {
		return Registration{}, fmt.Errorf("%w: %w", ErrInvalid, errCRCMismatch)
	}
	body, err := decodeRegisterBody(cmd.Body, compressed)
	if err != nil {
		return Registration{}, fmt.Errorf("decoding REGISTER_BROKER body (compressed=%t): %w", compressed, err)
	}
	reg.Topics, reg.DataVersion, reg.FilterServers = body.topics, body.version, body.filterServers
	return reg, nil
}

// newRegisterRequest builds reg's REGISTER_BROKER request as a RocketMQ 5
// broker does: identity header, enableActingMaster=false, the compressed
// flag telling the truth about the body, and the body's checksum. The
// compressed form loses topicSysFlag and order (RocketMQ's TopicConfig
// line format has neither), so brokers send the JSON form by default.
func newRegisterRequest(reg Registration, compress bool) (*remoting.Command, error) {
	body, err := encodeRegisterBody(registerBody{topics: reg.Topics, version: reg.DataVersion, filterServers: reg.FilterServers}, compress)
	if err != nil {
		return nil, fmt.Errorf("encoding REGISTER_BROKER body for %s: %w", reg.BrokerAddr, err)
	}
	cmd := &remoting.Command{Code: remoting.CodeRegisterBroker, Body: body}
	cmd.SetExt(hdrBrokerName, reg.BrokerName)
	cmd.SetExt(hdrBrokerAddr, reg.BrokerAddr)
	cmd.SetExt(hdrClusterName, reg.Cluster)
	cmd.SetExt(hdrHAServerAddr, reg.HAServerAddr)
	cmd.SetExt(hdrBrokerID, strconv.FormatInt(reg.BrokerID, 10))
	cmd.SetExt(hdrActingMaster, "false")
	cmd.SetExt(hdrCompressed, strconv.FormatBool(compress))
	cmd.SetExt(hdrBodyCRC32, strconv.FormatInt(bodyCRC32(body), 10))
	if reg.HeartbeatTimeout > 0 {
		cmd.SetExt(hdrHeartbeatTimeout, strconv.FormatInt(reg.HeartbeatTimeout.Milliseconds(), 10))
	}
	return cmd, nil
}

// brokerRef names one broker: UNREGISTER_BROKER's and
// QUERY_DATA_VERSION's header (all four fields @CFNotNull).
type brokerRef struct {
	cluster, name, addr string
	id                  int64
}

func decodeBrokerRef(cmd *remoting.Command, what string) (brokerRef, error) {
	f := fields{cmd: cmd}
	ref := brokerRef{
		name:    f.required(hdrBrokerName),
		addr:    f.required(hdrBrokerAddr),
		cluster: f.required(hdrClusterName),
		id:      f.int(hdrBrokerID, 64, 0, true),
	}
	if f.err == nil && ref.id < 0 {
		f.fail("broker id %d is negative", ref.id)
	}
	if f.err != nil {
		return brokerRef{}, fmt.Errorf("decoding %s header: %w", what, f.err)
	}
	return ref, nil
}

func (b brokerRef) setOn(cmd *remoting.Command) {
	cmd.SetExt(hdrBrokerName, b.name)
	cmd.SetExt(hdrBrokerAddr, b.addr)
	cmd.SetExt(hdrClusterName, b.cluster)
	cmd.SetExt(hdrBrokerID, strconv.FormatInt(b.id, 10))
}

func newUnregisterRequest(b brokerRef) *remoting.Command {
	cmd := &remoting.Command{Code: remoting.CodeUnregisterBroker}
	b.setOn(cmd)
	return cmd
}
