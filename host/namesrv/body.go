package namesrv

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/keelmq/keel/core/meta"
)

// registerBody is RocketMQ's RegisterBrokerBody as keel uses it: the
// broker's topic table with its version, and the filter server list.
// Static-topic mappings (topicQueueMappingInfoMap) are read past and
// dropped: keel has no static topics.
type registerBody struct {
	topics        map[string]meta.TopicConfig
	version       meta.DataVersion
	filterServers []string
}

// registerBodyJSON is the JSON form. meta.TopicConfig and meta.DataVersion
// carry RocketMQ's JSON field names (topicName, readQueueNums,
// writeQueueNums, perm, topicFilterType, topicSysFlag, order; stateVersion,
// timestamp, counter), so they are used as they are; what Java adds
// (attributes, mappingDataVersion, topicQueueMapping*) is ignored.
type registerBodyJSON struct {
	TopicConfigSerializeWrapper topicConfigWrapperJSON `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string               `json:"filterServerList"`
}

type topicConfigWrapperJSON struct {
	TopicConfigTable map[string]meta.TopicConfig `json:"topicConfigTable"`
	DataVersion      meta.DataVersion            `json:"dataVersion"`
}

// decodeRegisterBody decodes a REGISTER_BROKER body in the form compressed
// names, or in the zlib form when the body starts with a zlib header
// whatever the flag says: RocketMQ 5 brokers with compressedRegister send
// compressed=false beside a compressed body (see the reference, §6.1), and
// a zlib header can never start a JSON body. An empty body is an empty table at the zero version, as RocketMQ
// treats a missing one. A topic whose TopicName is empty takes its key's;
// one whose name differs from its key is an error. It never panics.
func decodeRegisterBody(b []byte, compressed bool) (registerBody, error) {
	if len(b) == 0 {
		return registerBody{topics: map[string]meta.TopicConfig{}}, nil
	}
	if compressed || isZlib(b) {
		return decodeRegisterBodyZlib(b)
	}
	var j registerBodyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return registerBody{}, fmt.Errorf("%w: RegisterBrokerBody JSON: %v", ErrInvalid, err)
	}
	topics := make(map[string]meta.TopicConfig, len(j.TopicConfigSerializeWrapper.TopicConfigTable))
	for name, tc := range j.TopicConfigSerializeWrapper.TopicConfigTable {
		if tc.TopicName == "" {
			tc.TopicName = name
		}
		if tc.TopicName != name {
			return registerBody{}, fmt.Errorf("%w: topicConfigTable key %q holds topic %q", ErrInvalid, name, tc.TopicName)
		}
		topics[name] = tc
	}
	return registerBody{topics: topics, version: j.TopicConfigSerializeWrapper.DataVersion, filterServers: j.FilterServerList}, nil
}

// isZlib reports whether b starts with a zlib stream header (RFC 1950:
// deflate method, window at most 32 KiB, header check bits).
func isZlib(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0F == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

// encodeRegisterBody writes body in the JSON form, or the zlib form when
// compress is set.
func encodeRegisterBody(body registerBody, compress bool) ([]byte, error) {
	if compress {
		return encodeRegisterBodyZlib(body)
	}
	topics := body.topics
	if topics == nil {
		topics = map[string]meta.TopicConfig{}
	}
	filters := body.filterServers
	if filters == nil {
		filters = []string{}
	}
	return compactJSON(registerBodyJSON{
		TopicConfigSerializeWrapper: topicConfigWrapperJSON{TopicConfigTable: topics, DataVersion: body.version},
		FilterServerList:            filters,
	})
}

// compactJSON marshals v compactly, without HTML escaping and without the
// trailing newline: route bodies are partly hand-parsed by
// rocketmq-client-go, which cannot cope with anything else.
func compactJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("marshalling %T: %w", v, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// mustJSON is compactJSON for values made only of strings, integers,
// slices and string-keyed maps, which cannot fail to marshal.
func mustJSON(v any) []byte {
	b, err := compactJSON(v)
	if err != nil {
		panic("namesrv: " + err.Error())
	}
	return b
}
