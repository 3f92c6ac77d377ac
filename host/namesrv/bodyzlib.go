package namesrv

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/keelmq/keel/core/meta"
)

// maxInflated bounds the decompressed size of a compressed
// RegisterBrokerBody (a zlib bomb is refused, not inflated).
const maxInflated = 64 << 20

// The compressed RegisterBrokerBody (RocketMQ's RegisterBrokerBody.encode(true))
// is one zlib stream of, in order, each a big-endian int32 length or count
// followed by that many bytes or items:
//
//	len, dataVersion JSON
//	topic count; per topic: len, TopicConfig.encode() line
//	len, filterServerList JSON
//	mapping count; per mapping: len, TopicQueueMappingInfo JSON (5.x only)
//
// A topic line is "name readQueueNums writeQueueNums perm topicFilterType",
// RocketMQ 5 appending " attributesJSON"; it has no topicSysFlag and no
// order. A 4.x body ends after the filter server list.

// decodeRegisterBodyZlib decodes the compressed form. It never panics and
// allocates no more than the inflated data it actually reads.
func decodeRegisterBodyZlib(b []byte) (registerBody, error) {
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return registerBody{}, fmt.Errorf("%w: compressed RegisterBrokerBody: %v", ErrInvalid, err)
	}
	d := zlibParts{r: bufio.NewReader(io.LimitReader(zr, maxInflated+1))}
	body, err := d.body()
	if err != nil {
		return registerBody{}, fmt.Errorf("%w: compressed RegisterBrokerBody: %v", ErrInvalid, err)
	}
	return body, nil
}

type zlibParts struct {
	r *bufio.Reader
	n int64 // bytes read so far
}

func (d *zlibParts) int32(what string) (int32, error) {
	var buf [4]byte
	if _, err := io.ReadFull(d.r, buf[:]); err != nil {
		return 0, fmt.Errorf("reading %s: %w", what, truncated(err))
	}
	d.n += 4
	return int32(binary.BigEndian.Uint32(buf[:])), nil
}

// part reads one length-prefixed part.
func (d *zlibParts) part(what string) ([]byte, error) {
	n, err := d.int32(what + " length")
	if err != nil {
		return nil, err
	}
	if n < 0 || int64(n) > maxInflated-d.n {
		return nil, fmt.Errorf("%s length %d out of range", what, n)
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, d.r, int64(n)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, truncated(err))
	}
	d.n += int64(n)
	if d.n > maxInflated {
		return nil, fmt.Errorf("inflates to more than %d bytes", maxInflated)
	}
	return buf.Bytes(), nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (d *zlibParts) body() (registerBody, error) {
	var body registerBody
	v, err := d.part("dataVersion")
	if err != nil {
		return body, err
	}
	if err := json.Unmarshal(v, &body.version); err != nil {
		return body, fmt.Errorf("dataVersion JSON: %v", err)
	}
	count, err := d.int32("topic count")
	if err != nil {
		return body, err
	}
	if count < 0 {
		return body, fmt.Errorf("negative topic count %d", count)
	}
	body.topics = make(map[string]meta.TopicConfig, min(int(count), 1024))
	for i := range count {
		line, err := d.part("topic config " + strconv.Itoa(int(i)))
		if err != nil {
			return body, err
		}
		tc, err := decodeTopicLine(string(line))
		if err != nil {
			return body, err
		}
		body.topics[tc.TopicName] = tc
	}
	fl, err := d.part("filterServerList")
	if err != nil {
		return body, err
	}
	if err := json.Unmarshal(fl, &body.filterServers); err != nil {
		return body, fmt.Errorf("filterServerList JSON: %v", err)
	}
	if _, err := d.r.Peek(1); err == io.EOF {
		return body, nil // a 4.x body: no mappings
	}
	maps, err := d.int32("mapping count")
	if err != nil {
		return body, err
	}
	if maps < 0 {
		return body, fmt.Errorf("negative mapping count %d", maps)
	}
	for i := range maps {
		if _, err := d.part("topic queue mapping " + strconv.Itoa(int(i))); err != nil {
			return body, err
		}
	}
	switch _, err := d.r.Peek(1); {
	case err == io.EOF:
		return body, nil
	case err != nil:
		return body, fmt.Errorf("after the topic queue mappings: %w", err)
	default:
		return body, errors.New("trailing bytes after the topic queue mappings")
	}
}

// decodeTopicLine parses one TopicConfig.encode() line. Fields past the
// fifth (RocketMQ 5's attributes JSON, which may itself hold spaces) are
// ignored, as keel has no topic attributes; trailing empty fields are
// dropped first, as Java's String.split does.
func decodeTopicLine(line string) (meta.TopicConfig, error) {
	parts := strings.Split(line, " ")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) < 5 {
		return meta.TopicConfig{}, fmt.Errorf("topic config line %.80q has %d fields, want at least 5", line, len(parts))
	}
	var nums [3]int32
	for i, what := range []string{"readQueueNums", "writeQueueNums", "perm"} {
		n, err := strconv.ParseInt(parts[1+i], 10, 32)
		if err != nil {
			return meta.TopicConfig{}, fmt.Errorf("topic config line %.80q: %s %q is not an int32", line, what, parts[1+i])
		}
		nums[i] = int32(n)
	}
	if parts[4] == "" {
		// Java's TopicFilterType.valueOf("") throws.
		return meta.TopicConfig{}, fmt.Errorf("topic config line %.80q: empty topicFilterType", line)
	}
	return meta.TopicConfig{TopicName: parts[0], ReadQueueNums: nums[0], WriteQueueNums: nums[1], Perm: nums[2], TopicFilterType: parts[4]}, nil
}

// encodeTopicLine writes tc as a TopicConfig.encode() line with five
// fields, the form both RocketMQ 4 (which wants exactly five) and 5 read.
func encodeTopicLine(tc meta.TopicConfig) string {
	ft := tc.TopicFilterType
	if ft == "" {
		ft = meta.FilterSingleTag
	}
	return fmt.Sprintf("%s %d %d %d %s", tc.TopicName, tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm, ft)
}

// encodeRegisterBodyZlib writes the compressed form, topics sorted by
// name, with an empty mapping section as RocketMQ 5 writes it.
func encodeRegisterBodyZlib(body registerBody) ([]byte, error) {
	var out bytes.Buffer
	zw, err := zlib.NewWriterLevel(&out, zlib.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("starting zlib: %w", err)
	}
	var raw bytes.Buffer
	putPart := func(p []byte) {
		raw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
		raw.Write(p)
	}
	putCount := func(n int) { raw.Write(binary.BigEndian.AppendUint32(nil, uint32(n))) }
	putPart(mustJSON(body.version))
	names := sortedKeys(body.topics)
	putCount(len(names))
	for _, name := range names {
		putPart([]byte(encodeTopicLine(body.topics[name])))
	}
	filters := body.filterServers
	if filters == nil {
		filters = []string{}
	}
	putPart(mustJSON(filters))
	putCount(0)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, fmt.Errorf("compressing RegisterBrokerBody: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing RegisterBrokerBody: %w", err)
	}
	return out.Bytes(), nil
}
