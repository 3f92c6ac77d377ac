package remoting

import (
	"strconv"
	"testing"

	"github.com/keelmq/keel/core/record"
)

func TestSendBackTarget(t *testing.T) {
	for _, c := range []struct {
		reconsume  int32
		max, delay int
		wantTopic  string
		wantLevel  int
		name       string
	}{
		{0, 16, 0, "%RETRY%G", 3, "first retry: level 3"},
		{5, 16, 0, "%RETRY%G", 8, "level 3 + reconsumeTimes"},
		{15, 16, 0, "%RETRY%G", 18, "last retry"},
		{1, 16, 7, "%RETRY%G", 7, "the client's level"},
		{16, 16, 0, "%DLQ%G", 0, "the maximum reached"},
		{0, 16, -1, "%DLQ%G", 0, "level -1: dead letter at once"},
		{0, 0, 0, "%DLQ%G", 0, "maximum 0"},
	} {
		topic, level := sendBackTarget("G", c.reconsume, c.max, c.delay)
		if topic != c.wantTopic || level != c.wantLevel {
			t.Errorf("%s: %s level %d, want %s level %d", c.name, topic, level, c.wantTopic, c.wantLevel)
		}
	}
}

// The retry record carries the delay level the backend's Append turns
// into a stay in the schedule topic; a dead letter carries none.
func TestSendBackSetsTheDelayLevel(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{AutoCreateTopics: true})
	c := dialTest(t, e.addr)
	e.send(t, c, "ORIG", 0, "payload", props(record.PropertyUniqKey, "U1", record.PropertyDelayLevel, "2"))
	orig := pullAll(t, c, "ORIG")[0]
	sendBack := func(rec *record.Record, delayLevel string) {
		t.Helper()
		r := c.call(CodeConsumerSendMsgBack, map[string]string{
			"group": "G", "offset": strconv.FormatInt(rec.PhysOffset, 10), "delayLevel": delayLevel, "maxReconsumeTimes": "2",
		}, nil)
		if r.Code != Success {
			t.Fatalf("send back: %+v", r)
		}
	}
	sendBack(orig, "0")
	retry := pullAll(t, c, "%RETRY%G")
	if v, _ := record.GetProperty(retry[0].Properties, record.PropertyDelayLevel); v != "3" {
		t.Errorf("first retry DELAY = %q, want 3 (level 3 + reconsumeTimes 0)", v)
	}
	sendBack(retry[0], "5")
	retry = pullAll(t, c, "%RETRY%G")
	if v, _ := record.GetProperty(retry[1].Properties, record.PropertyDelayLevel); v != "5" {
		t.Errorf("retry with the client's level 5: DELAY = %q", v)
	}
	sendBack(retry[1], "0")
	dlq := pullAll(t, c, "%DLQ%G")
	if v, ok := record.GetProperty(dlq[0].Properties, record.PropertyDelayLevel); ok {
		t.Errorf("dead letter has DELAY = %q, want none", v)
	}
}
