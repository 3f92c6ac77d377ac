package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelmq/keel/core/meta"
)

// Reserved topic-name prefixes and names.
const (
	// RetryGroupTopicPrefix prefixes a consumer group's retry topic.
	RetryGroupTopicPrefix = "%RETRY%"
	// DLQGroupTopicPrefix prefixes a consumer group's dead-letter topic.
	DLQGroupTopicPrefix = "%DLQ%"
	// AutoCreateTopicKey is the default topic producers fall back to when
	// their topic has no route (RocketMQ's TBW102).
	AutoCreateTopicKey = "TBW102"
)

// The identity a broker has when none is configured: RocketMQ's
// brokerClusterName and brokerName defaults.
const (
	DefaultCluster    = "DefaultCluster"
	DefaultBrokerName = "broker-a"
)

// BrokerNamer is implemented by a Backend that knows its broker group's
// name (the host's does); queue keys in admin answers carry it.
type BrokerNamer interface {
	BrokerName() string
}

// compactJSON marshals v compactly without HTML escaping (route bodies are
// partly hand-parsed by rocketmq-client-go, which cannot cope with spaces).
func compactJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("remoting: marshalling %T: %v", v, err)) // only plain structs of strings and ints
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// ensureTopic returns topic's configuration, creating it when allowed:
// retry topics always (one queue), others when auto is set. A name that is
// not a valid topic name (meta.ValidateTopicName) is never created: the
// answer is "no such topic". The name is checked only when the topic is
// missing, and then once.
func ensureTopic(tt TopicTable, name string, auto bool, queues int32) (meta.TopicConfig, bool, error) {
	if t, ok := tt.Topic(name); ok {
		return t, true, nil
	}
	if !creatable(name, auto) || meta.ValidateTopicName(name) != nil {
		return meta.TopicConfig{}, false, nil
	}
	return createTopic(tt, name, queues)
}

// ensureValidTopic is ensureTopic for a name the caller has validated.
func ensureValidTopic(tt TopicTable, name string, auto bool, queues int32) (meta.TopicConfig, bool, error) {
	if t, ok := tt.Topic(name); ok {
		return t, true, nil
	}
	if !creatable(name, auto) {
		return meta.TopicConfig{}, false, nil
	}
	return createTopic(tt, name, queues)
}

// creatable reports whether a missing topic may be created: retry topics
// always, others when auto is set.
func creatable(name string, auto bool) bool {
	return auto || strings.HasPrefix(name, RetryGroupTopicPrefix)
}

// createTopic creates a read-write topic of queues queues (one for a retry
// topic), or returns the one a concurrent creation made.
func createTopic(tt TopicTable, name string, queues int32) (meta.TopicConfig, bool, error) {
	if strings.HasPrefix(name, RetryGroupTopicPrefix) {
		queues = groupTopicQueues
	}
	t, err := tt.CreateTopic(meta.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: meta.PermRead | meta.PermWrite})
	if err != nil {
		return meta.TopicConfig{}, false, fmt.Errorf("creating topic %q: %w", name, err)
	}
	return t, true, nil
}

// EnsureTopic is the auto-creation rule for a topic a client names: it
// returns name's configuration, creating it when allowed (retry topics
// always, with one queue; others when auto is set, with queues queues). A
// name meta.ValidateTopicName rejects is never created: ok is false.
// created reports whether this call created it.
func EnsureTopic(tt TopicTable, name string, auto bool, queues int32) (t meta.TopicConfig, ok, created bool, err error) {
	if t, ok := tt.Topic(name); ok {
		return t, true, false, nil
	}
	t, ok, err = ensureTopic(tt, name, auto, queues)
	return t, ok, ok && err == nil, err
}
