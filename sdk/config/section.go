package config

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/pelletier/go-toml/v2/unstable"
)

// OverridesKey is the top-level key under which WithOverrides appends --set
// overrides to a document, as an array of tables:
//
//	[[--set]]
//	arg = "flush.config.interval=1s"
//	doc = "flush.config.interval = \"1s\"\n"
//
// A profile cannot use the key itself (the host rejects unknown top-level
// keys, and this one is not a key of the profile schema).
const OverridesKey = "--set"

// Override is one --set override of a document.
type Override struct {
	// Arg is the argument as the user gave it ("flush.config.interval=1s");
	// errors about the override name it instead of a line and column.
	Arg string
	// Doc is the one-line TOML document Arg stands for, a single key-value
	// with the full dotted key: `flush.config.interval = "1s"`.
	Doc []byte
}

// WithOverrides returns a copy of doc with overrides appended under
// OverridesKey, in order; doc itself is not modified. The result is valid
// TOML when doc is (and does not use OverridesKey). Every byte of doc keeps
// its line and column, so DecodeSection reports problems in doc at the
// places the user wrote them, and problems in an override against its Arg.
// With no overrides the result is a plain copy of doc.
//
// The overrides are data, not merged into doc's tables (merging would lose
// both the positions and which override set a value): a reader other than
// DecodeSection that wants the effective values must apply them itself, in
// order, each on top of the result of the previous ones, an override of a
// whole table replacing it.
func WithOverrides(doc []byte, overrides []Override) []byte {
	out := bytes.Clone(doc)
	if len(overrides) == 0 {
		return out
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, "\n# --set overrides, applied in order on top of the document above.\n"...)
	for _, o := range overrides {
		out = fmt.Appendf(out, "[[%s]]\narg = %s\ndoc = %s\n", OverridesKey, Quote(o.Arg), Quote(string(o.Doc)))
	}
	return out
}

// DecodeSection decodes the table <section>.config of doc, a whole TOML
// document such as a keel profile (with any --set overrides appended by
// WithOverrides), into v, a non-nil pointer to a plugin's config struct
// (or to a map), strictly: an unknown key, a value of the wrong type or a
// value a field's own parser rejects fails with an *Error, or an ErrorList
// of several unknown keys, whose text is
//
//	FILE:LINE:COL: SECTION.config.KEY: what is wrong and what is allowed
//	FILE: --set ARG: SECTION.config.KEY: ...      (a value an override set)
//
// where FILE is file, the position is that of the offending key or value in
// doc, and an unknown key's message lists the keys allowed in its table.
// Keys outside <section>.config are not looked at.
//
// Overrides are applied in order after the document; an override of the
// whole table ("flush.config={...}") replaces what the document and earlier
// overrides set, one of a key below it changes that key, one above it
// ("flush={config={...}}") is decoded on top.
//
// Keys the table does not set leave v's fields untouched, so fill v with
// defaults first; when neither doc nor an override sets <section>.config, v
// is unchanged and the result is nil. Fields of type Duration, Size and
// Ratio, and any field implementing unstable.Unmarshaler, see the raw TOML
// value; fields implementing encoding.TextUnmarshaler see strings. On error
// v may be partly written.
//
// section must be a bare TOML key ("flush", "replication", "index"); other
// misuse (a nil or non-pointer v) returns an error that is not an *Error.
// DecodeSection does not retain doc or v and is safe for concurrent use
// (on different v).
func DecodeSection(file string, doc []byte, section string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("decoding %s.config: want a non-nil pointer, got %T", section, v)
	}
	if !isBareKey(section) || section == OverridesKey {
		return fmt.Errorf("decoding %s.config: invalid section name %q (want a bare key such as \"flush\")", section, section)
	}
	base, serr := newSource(file, doc, "")
	if serr != nil {
		return serr
	}
	overrides, err := base.overrides()
	if err != nil {
		return err
	}

	wt := wrapperType(section, rv.Type())
	build := func(cfg reflect.Value) any {
		w := reflect.New(wt)
		w.Elem().Field(0).Field(0).Set(cfg)
		return w.Interface()
	}
	fresh := func() any { return build(reflect.New(rv.Type().Elem())) }

	cfgPath := []string{section, "config"}
	// An override of the whole table replaces it: the document and earlier
	// overrides are skipped.
	start := 0
	for i, ov := range overrides {
		if equalPath(ov.path, cfgPath) {
			start = i + 1
		}
	}
	if start == 0 && base.Has(cfgPath) {
		if errs := base.decode(build(rv), fresh, cfgPath); errs != nil {
			return errs.Err()
		}
	}
	if start > 0 {
		start--
	}
	for _, ov := range overrides[start:] {
		if hasPrefix(ov.path, cfgPath) || hasPrefix(cfgPath, ov.path) {
			if errs := ov.src.decode(build(rv), fresh, cfgPath); errs != nil {
				return errs.Err()
			}
		}
	}
	return nil
}

// wrapperType returns struct{ S struct{ C cfg `toml:"config"` }
// `toml:"<section>"` }: decoding a whole document into it hands the
// section's config table to cfg with the document's own positions.
func wrapperType(section string, cfg reflect.Type) reflect.Type {
	sec := reflect.StructOf([]reflect.StructField{{Name: "C", Type: cfg, Tag: `toml:"config"`}})
	return reflect.StructOf([]reflect.StructField{{Name: "S", Type: sec, Tag: reflect.StructTag(`toml:"` + section + `"`)}})
}

// sourceOverride is one override read back from a document.
type sourceOverride struct {
	src  *Source
	path []string // the key it sets
}

// overrides parses the overrides WithOverrides appended to s. An entry that
// is not an arg string and a doc string, or a doc that is not one valid
// key-value, is an *Error.
func (s *Source) overrides() ([]sourceOverride, error) {
	type item struct {
		at       position
		arg, doc string
		hasDoc   bool
	}
	var items []*item
	key := []string{OverridesKey}
	malformed := func(at position, why string) error {
		return &Error{File: s.file, Line: at.Line, Col: at.Col, Key: OverridesKey,
			Msg: "malformed override list (" + why + "): want [[" + OverridesKey + "]] tables with arg and doc strings, as config.WithOverrides writes them"}
	}
	for i := range s.idx.entries {
		e := &s.idx.entries[i]
		if !hasPrefix(e.path, key) {
			continue
		}
		switch {
		case len(e.path) == 1 && e.kind == unstable.ArrayTable:
			items = append(items, &item{at: e.valPos})
		case len(items) == 0:
			return nil, malformed(e.valPos, "not an array of tables")
		case len(e.path) == 2 && e.path[1] == "arg" && e.kind == unstable.String:
			items[len(items)-1].arg = e.text
		case len(e.path) == 2 && e.path[1] == "doc" && e.kind == unstable.String:
			it := items[len(items)-1]
			it.doc, it.hasDoc = e.text, true
		default:
			return nil, malformed(e.partPos[len(e.partPos)-1], "unexpected key "+FormatKey(e.path))
		}
	}
	out := make([]sourceOverride, 0, len(items))
	for _, it := range items {
		if !it.hasDoc || it.arg == "" {
			return nil, malformed(it.at, "an entry lacks arg or doc")
		}
		src, serr := newSource(s.file, []byte(it.doc), it.arg)
		if serr != nil {
			return nil, serr
		}
		if len(src.idx.cuts) != 1 || len(src.idx.entries) == 0 || src.idx.entries[0].kind == unstable.Table || src.idx.entries[0].kind == unstable.ArrayTable {
			return nil, &Error{File: s.file, Override: it.arg, Msg: "the override is not a single key = value"}
		}
		out = append(out, sourceOverride{src: src, path: src.idx.entries[0].path})
	}
	return out, nil
}
