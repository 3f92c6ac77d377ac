package schedule

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/keelmq/keel/core/record"
)

func props(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	m, err := record.ParseProperties(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRewriteMovesADelayedMessage(t *testing.T) {
	l, _ := ParseLevels("1s 2s 3s")
	m := &record.Message{Topic: "T", QueueID: 2, Body: []byte("b"), Properties: record.EncodeProperties(map[string]string{
		"DELAY": "2", "UNIQ_KEY": "ID1", "TAGS": "a", "TIMER_DELIVER_MS": "5", "TIMER_DELAY_SEC": "3",
	})}
	level, err := l.Rewrite(m)
	if err != nil || level != 2 {
		t.Fatalf("Rewrite = %d, %v; want 2, nil", level, err)
	}
	if m.Topic != Topic || m.QueueID != 1 {
		t.Errorf("stored under %s/%d, want %s/1", m.Topic, m.QueueID, Topic)
	}
	want := map[string]string{"DELAY": "2", "UNIQ_KEY": "ID1", "TAGS": "a", "REAL_TOPIC": "T", "REAL_QID": "2"}
	got := props(t, m.Properties)
	if len(got) != len(want) {
		t.Errorf("properties %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("property %s = %q, want %q", k, got[k], v)
		}
	}
}

func TestRewriteClampsToTheLastLevel(t *testing.T) {
	l, _ := ParseLevels("1s 2s 3s")
	m := &record.Message{Topic: "T", Properties: record.EncodeProperties(map[string]string{"DELAY": "17"})}
	level, err := l.Rewrite(m)
	if err != nil || level != 3 || m.QueueID != 2 {
		t.Fatalf("Rewrite = %d, %v, queue %d; want 3, nil, queue 2", level, err, m.QueueID)
	}
	if got := props(t, m.Properties)["DELAY"]; got != "3" {
		t.Errorf("DELAY = %q, want the clamped 3", got)
	}
}

func TestRewriteLeavesOtherMessagesAlone(t *testing.T) {
	l, _ := ParseLevels(DefaultLevels)
	for name, m := range map[string]*record.Message{
		"no DELAY":   {Topic: "T", Properties: record.EncodeProperties(map[string]string{"TAGS": "a"})},
		"DELAY 0":    {Topic: "T", Properties: record.EncodeProperties(map[string]string{"DELAY": "0"})},
		"DELAY -1":   {Topic: "T", Properties: record.EncodeProperties(map[string]string{"DELAY": "-1"})},
		"half":       {Topic: "T", SysFlag: record.SysFlagTransactionPrepared, Properties: record.EncodeProperties(map[string]string{"DELAY": "3"})},
		"rollback":   {Topic: "T", SysFlag: record.SysFlagTransactionRollback, Properties: record.EncodeProperties(map[string]string{"DELAY": "3"})},
		"no propert": {Topic: "T"},
	} {
		before := string(m.Properties)
		level, err := l.Rewrite(m)
		if err != nil || level != 0 || m.Topic != "T" || string(m.Properties) != before {
			t.Errorf("%s: Rewrite = %d, %v, topic %s; want it untouched", name, level, err, m.Topic)
		}
	}
}

func TestRewriteRefusesAMalformedDelay(t *testing.T) {
	l, _ := ParseLevels(DefaultLevels)
	m := &record.Message{Topic: "T", Properties: record.EncodeProperties(map[string]string{"DELAY": "soon"})}
	if _, err := l.Rewrite(m); !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("Rewrite of DELAY=soon: %v, want an error wrapping record.ErrInvalid", err)
	}
	if m.Topic != "T" {
		t.Errorf("refused message was moved to %s", m.Topic)
	}
}

func TestDeliverRestoresTheRealQueue(t *testing.T) {
	l, _ := ParseLevels("1s 2s 3s")
	host := netip.MustParseAddrPort("10.0.0.1:10911")
	m := &record.Message{Topic: "T", QueueID: 3, Flag: 7, Body: []byte("body"), SysFlag: record.SysFlagCompressed,
		BornTimestamp: 1234, BornHost: host, StoreHost: host, ReconsumeTimes: 2,
		Properties: record.EncodeProperties(map[string]string{"DELAY": "1", "UNIQ_KEY": "ID1", "KEYS": "k"})}
	if _, err := l.Rewrite(m); err != nil {
		t.Fatal(err)
	}
	enc, err := record.Encode(nil, m, record.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Deliver(rec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Topic != "T" || d.QueueID != 3 || d.Flag != 7 || string(d.Body) != "body" || d.SysFlag != rec.SysFlag ||
		d.BornTimestamp != 1234 || d.BornHost != host || d.StoreHost != host || d.ReconsumeTimes != 2 {
		t.Errorf("delivered %+v, want the original's fields", d)
	}
	got := props(t, d.Properties)
	want := map[string]string{"UNIQ_KEY": "ID1", "KEYS": "k", "REAL_TOPIC": "T", "REAL_QID": "3"}
	if len(got) != len(want) {
		t.Errorf("properties %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("property %s = %q, want %q", k, got[k], v)
		}
	}
	if lvl, err := l.Rewrite(d); lvl != 0 || err != nil {
		t.Errorf("a delivered message is rewritten again: %d, %v", lvl, err)
	}
}

func TestDeliverNeedsTheRealQueue(t *testing.T) {
	for name, p := range map[string]map[string]string{
		"no REAL_TOPIC":  {"REAL_QID": "1"},
		"bad REAL_QID":   {"REAL_TOPIC": "T", "REAL_QID": "x"},
		"no REAL_QID":    {"REAL_TOPIC": "T"},
		"negative queue": {"REAL_TOPIC": "T", "REAL_QID": "-2"},
	} {
		rec := &record.Record{Topic: Topic, Properties: record.EncodeProperties(p)}
		if _, err := Deliver(rec); err == nil {
			t.Errorf("%s: Deliver succeeded", name)
		}
	}
}
