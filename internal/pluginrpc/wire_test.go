package pluginrpc

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/keelmq/keel/sdk"
)

// TestConfigToPBSendsExactlyConfig checks that Configure sends every field
// of sdk.Config, each in the wire field of the same name, and that the
// wire message has no field sdk.Config does not: a plugin receives what
// the host built for it and nothing else.
func TestConfigToPBSendsExactlyConfig(t *testing.T) {
	var cfg sdk.Config
	v := reflect.ValueOf(&cfg).Elem()
	want := map[string]string{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		val := "value of " + f.Name
		switch f.Type.Kind() {
		case reflect.String:
			v.Field(i).SetString(val)
		case reflect.Slice:
			v.Field(i).SetBytes([]byte(val))
		default:
			t.Fatalf("sdk.Config.%s: type %s not covered by this test", f.Name, f.Type)
		}
		want[strings.ToLower(f.Name)] = val
	}
	m := configToPB(cfg).ProtoReflect()
	fields := m.Descriptor().Fields()
	if fields.Len() != len(want) {
		t.Errorf("pluginpb.Config has %d fields, sdk.Config %d", fields.Len(), len(want))
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := strings.ReplaceAll(string(fd.Name()), "_", "")
		w, ok := want[name]
		if !ok {
			t.Errorf("pluginpb.Config.%s has no sdk.Config field", fd.Name())
			continue
		}
		var got string
		switch fd.Kind() {
		case protoreflect.BytesKind:
			got = string(m.Get(fd).Bytes())
		default:
			got = m.Get(fd).String()
		}
		if got != w {
			t.Errorf("pluginpb.Config.%s = %q, want %q", fd.Name(), got, w)
		}
	}
}
