package config

import (
	"encoding"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

var (
	tomlUnmarshalerType = reflect.TypeOf((*unstable.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	durationType        = reflect.TypeOf(Duration(0))
	sizeType            = reflect.TypeOf(Size(0))
	ratioType           = reflect.TypeOf(Ratio(0))
)

// typeAt follows path from root through struct fields (matched the way
// go-toml matches them: tag name, then field name, then case-insensitively),
// map values and slice elements. ok is false when the path leaves the typed
// part (an interface) or names no field.
func typeAt(root reflect.Type, path []string) (reflect.Type, bool) {
	t := root
	for _, name := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByKey(t, name)
			if !ok {
				return nil, false
			}
			t = f
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, true
}

// tomlFields lists a struct's TOML keys and field types, flattening untagged
// embedded structs as go-toml does.
func tomlFields(t reflect.Type) (names []string, types []reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				n, ty := tomlFields(ft)
				names = append(names, n...)
				types = append(types, ty...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		types = append(types, f.Type)
	}
	return names, types
}

// fieldNames lists the keys a table of type t allows, or nil when it allows
// any key (a map or an interface).
func fieldNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	names, _ := tomlFields(t)
	if names == nil {
		names = []string{}
	}
	return names
}

func fieldByKey(t reflect.Type, key string) (reflect.Type, bool) {
	ft, _, ok := fieldLookup(t, key)
	return ft, ok
}

// fieldLookup finds the field of struct t that go-toml decodes key into;
// exact is false when only a case-insensitive match exists.
func fieldLookup(t reflect.Type, key string) (ft reflect.Type, exact, ok bool) {
	names, types := tomlFields(t)
	for i, n := range names {
		if n == key {
			return types[i], true, true
		}
	}
	for i, n := range names {
		if strings.EqualFold(n, key) {
			return types[i], false, true
		}
	}
	return nil, false, false
}
