package remoting

import (
	"reflect"
	"testing"
)

func TestFields(t *testing.T) {
	var f Fields
	if v, ok := f.Get("a"); ok || v != "" {
		t.Fatalf("empty Get = %q, %v", v, ok)
	}
	f.Set("b", "1")
	f.Set("a", "2")
	f.Set("b", "3") // replaces
	if len(f) != 2 {
		t.Fatalf("Set appended a duplicate: %v", f)
	}
	f = append(f, Field{"a", "4"}) // as a decoder appends a repeated key
	if v, _ := f.Get("a"); v != "4" {
		t.Fatalf("Get(a) = %q, want the last occurrence 4", v)
	}
	if got, want := f.Unique(nil), (Fields{{"a", "4"}, {"b", "3"}}); !reflect.DeepEqual(Fields(got), want) {
		t.Fatalf("unique = %v, want %v", got, want)
	}
	if got, want := f.Map(), map[string]string{"a": "4", "b": "3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Map = %v, want %v", got, want)
	}
	if got := FieldsOf(map[string]string{"z": "1", "y": "2"}); !reflect.DeepEqual(got, Fields{{"y", "2"}, {"z", "1"}}) {
		t.Fatalf("FieldsOf = %v", got)
	}
	// The encoders write each key once, its last value, sorted.
	c := &Command{ExtFields: Fields{{"k", "old"}, {"j", "x"}, {"k", "new"}}}
	back, err := DecodeHeader(SerializeJSON, c.AppendFrame(nil)[8:])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.ExtFields, Fields{{"j", "x"}, {"k", "new"}}) {
		t.Fatalf("re-decoded %v", back.ExtFields)
	}
	many := make(Fields, 0, 40)
	for i := 39; i >= 0; i-- {
		many = append(many, Field{string(rune('A' + i)), "v"}, Field{string(rune('A' + i)), "w"})
	}
	u := many.Unique(nil)
	if len(u) != 40 || u[0].Key != "A" || u[0].Value != "w" || u[39].Key != string(rune('A'+39)) {
		t.Fatalf("unique of 80 = %v", u)
	}
}
