package config

import "github.com/pelletier/go-toml/v2/unstable"

// Source is one parsed TOML document, indexed so that problems found while
// or after decoding it can be reported at a line and column: the profile
// file, or the one-line document of a --set override. A Source is immutable
// after NewSource and safe for concurrent use.
type Source struct {
	file     string
	doc      []byte
	idx      *docIndex
	override string // the --set argument, "" for the file
}

// NewSource parses and indexes doc. file names it in errors. override is ""
// for a file, or the --set argument ("store.segment_size=1KiB") doc was made
// from: errors about an override name the argument instead of a line and
// column. NewSource keeps doc; the caller must not modify it afterwards. A
// syntax error is returned as an *Error at the place of the error.
func NewSource(file string, doc []byte, override string) (*Source, error) {
	s, err := newSource(file, doc, override)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newSource is NewSource with the error as an *Error (nil when none); the
// returned Source indexes the expressions before a syntax error.
func newSource(file string, doc []byte, override string) (*Source, *Error) {
	idx, err := indexDocument(doc)
	s := &Source{file: file, doc: doc, idx: idx, override: override}
	if err != nil {
		pos, msg, _ := parserErrorPos(doc, err)
		return s, s.errAt(pos, nil, "syntax error: "+msg)
	}
	return s, nil
}

// errAt builds an Error at pos about path; for an override the position is
// dropped (it is a position in the one-line override document).
func (s *Source) errAt(pos position, path []string, msg string) *Error {
	e := &Error{File: s.file, Key: FormatKey(path), Msg: msg}
	if s.override != "" {
		e.Override = s.override
	} else {
		e.Line, e.Col = pos.Line, pos.Col
	}
	return e
}

// What follows is what a reader of a whole document (host/profile) asks a
// Source besides Decode (decode.go): whether a key is set, where, in which
// order, and with what value, so that checks made after decoding can be
// reported as precisely as decoding errors.

// File returns the document's name as given to NewSource.
func (s *Source) File() string { return s.file }

// Override returns the --set argument the document was made from, or "" for
// a file.
func (s *Source) Override() string { return s.override }

// Has reports whether the document sets path or a key below it: a table
// header [a.b] sets "a" and "a.b"; "a.b.c = 1" sets "a", "a.b" and "a.b.c".
func (s *Source) Has(path []string) bool {
	_, ok := s.idx.find(path)
	return ok
}

// Order returns the index, counted from 0 in document order, of the first
// top-level expression (key-value or table header) that sets path or a key
// below it. It lets a caller tell which of two keys was written last. ok is
// false when the document does not set path.
func (s *Source) Order(path []string) (n int, ok bool) {
	e, ok := s.idx.find(path)
	if !ok {
		return 0, false
	}
	return e.expr, true
}

// ValuePos returns the line and column (1-based; the column counts bytes)
// of path's value when the document sets path with a key-value, else of the
// first key that sets path or a key below it (a table header). ok is false
// when the document does not set path.
func (s *Source) ValuePos(path []string) (line, col int, ok bool) {
	p, ok := s.idx.valuePos(path)
	return p.Line, p.Col, ok
}

// Value is a key's value as the document writes it.
type Value struct {
	// Line and Col locate the value (for a table header, its key).
	Line, Col int
	// Kind is "string", "integer", "float", "boolean", "date/time",
	// "array" or "table" (a table header, an array of tables or an inline
	// table).
	Kind string
	// Text is a scalar's content: a string's unescaped text, the literal
	// text of a number ("0x1F", "1_000"), boolean or date; "" for arrays
	// and tables.
	Text string

	kind unstable.Kind
}

// Describe names the value's kind with an article for messages: "an
// integer", "a string", "a table".
func (v Value) Describe() string { return kindName(v.kind, true) }

// Lookup returns the value path is set to: the first key-value or table
// header whose key is exactly path. ok is false when there is none (the
// document may still set keys below path with dotted keys).
func (s *Source) Lookup(path []string) (v Value, ok bool) {
	e, ok := s.idx.exact(path)
	if !ok {
		return Value{}, false
	}
	return Value{Line: e.valPos.Line, Col: e.valPos.Col, Kind: kindNoun(e.kind), Text: e.text, kind: e.kind}, true
}

// kindNoun names a value kind for Value.Kind.
func kindNoun(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "string"
	case unstable.Integer:
		return "integer"
	case unstable.Float:
		return "float"
	case unstable.Bool:
		return "boolean"
	case unstable.Array:
		return "array"
	case unstable.DateTime, unstable.LocalDate, unstable.LocalDateTime, unstable.LocalTime:
		return "date/time"
	default:
		return "table"
	}
}
