package record

import (
	"strings"
	"testing"
)

// TestToRealTarget: a parked record goes back to REAL_TOPIC/REAL_QID with
// every field and property kept but those removed; a record lacking its
// target says what is missing.
func TestToRealTarget(t *testing.T) {
	props := SetProperty(nil, PropertyRealTopic, "Orders")
	props = SetProperty(props, PropertyRealQueueID, "3")
	props = SetProperty(props, PropertyUniqKey, "U1")
	props = SetProperty(props, PropertyDelayLevel, "2")
	rec := &Record{Header: Header{PhysOffset: 77, Flag: 5, ReconsumeTimes: 2}, Body: []byte("b"), Properties: props}
	m, err := ToRealTarget(rec, PropertyDelayLevel)
	if err != nil {
		t.Fatal(err)
	}
	if m.Topic != "Orders" || m.QueueID != 3 || m.Flag != 5 || m.ReconsumeTimes != 2 || string(m.Body) != "b" {
		t.Fatalf("message %+v", m)
	}
	if _, ok := GetProperty(m.Properties, PropertyDelayLevel); ok {
		t.Error("removed property kept")
	}
	if u, _ := GetProperty(m.Properties, PropertyUniqKey); u != "U1" {
		t.Errorf("UNIQ_KEY %q", u)
	}
	if _, ok := GetProperty(rec.Properties, PropertyDelayLevel); !ok {
		t.Error("the record's own properties were modified")
	}
	for _, bad := range [][]byte{nil, SetProperty(nil, PropertyRealTopic, "T"), SetProperty(SetProperty(nil, PropertyRealTopic, "T"), PropertyRealQueueID, "-1")} {
		if _, err := ToRealTarget(&Record{Header: Header{PhysOffset: 9}, Properties: bad}); err == nil || !strings.Contains(err.Error(), "record at 9") {
			t.Errorf("props %q: err %v", bad, err)
		}
	}
}
