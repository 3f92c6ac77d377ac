package sdk

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/keelmq/keel/internal/pluginpb"
)

// TestConfigFromPBReadsEveryField checks that Configure's wire Config
// becomes an sdk.Config with every field, each from the wire field of the
// same name (internal/pluginrpc checks the host end's encoding).
func TestConfigFromPBReadsEveryField(t *testing.T) {
	msg := &pluginpb.Config{}
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	want := map[string]string{}
	for i := range fields.Len() {
		fd := fields.Get(i)
		val := "value of " + string(fd.Name())
		if fd.Kind() == protoreflect.BytesKind {
			m.Set(fd, protoreflect.ValueOfBytes([]byte(val)))
		} else {
			m.Set(fd, protoreflect.ValueOfString(val))
		}
		want[strings.ReplaceAll(string(fd.Name()), "_", "")] = val
	}
	v := reflect.ValueOf(configFromPB(msg))
	if v.NumField() != len(want) {
		t.Errorf("sdk.Config has %d fields, pluginpb.Config %d", v.NumField(), len(want))
	}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		var got string
		if b, ok := v.Field(i).Interface().([]byte); ok {
			got = string(b)
		} else {
			got = v.Field(i).String()
		}
		if w := want[strings.ToLower(name)]; got != w {
			t.Errorf("sdk.Config.%s = %q, want %q", name, got, w)
		}
	}
}
