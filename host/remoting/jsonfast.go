package remoting

import (
	"strings"
	"unicode/utf8"
)

// This file holds the hand-written fast path for JSON command headers.
//
// fastDecodeJSONHeader handles the headers real clients send: one JSON
// object whose known fields appear at most once and hold the value types
// encoding/json would accept for them. Whenever it meets anything it does not
// handle exactly as encoding/json (via decodeJSONHeaderStd) would — a
// duplicate or case-folded field name, a string with a lone surrogate or
// invalid UTF-8, a number that is not a plain integer in range, deep nesting,
// a top-level value that is not an object, or any syntax error — it gives up
// and the caller decodes with encoding/json instead. Correctness therefore
// never depends on the fast path: it either produces exactly what the
// encoding/json path would produce, or declines.

// Bits of the set of known top-level fields fastDecodeJSONHeader has seen,
// one per field.
const (
	seenCode = 1 << iota
	seenLanguage
	seenVersion
	seenOpaque
	seenFlag
	seenRemark
	seenExtFields
)

// maxFastDepth bounds the nesting the fast path skips over; deeper values
// fall back to encoding/json (which has its own, larger limit).
const maxFastDepth = 64

type fastParser struct {
	b []byte
	s string // b as one string: unescaped string values are substrings of it
	i int
}

// fastDecodeJSONHeader decodes h as decodeJSONHeaderStd would. ok is false
// when the fast path declines; the caller must then use the standard path.
func fastDecodeJSONHeader(h []byte) (c *Command, ok bool) {
	p := fastParser{b: h, s: string(h)}
	p.ws()
	more, ok := p.open('{', '}')
	if !ok {
		return nil, false
	}
	c = &Command{SerializeType: SerializeJSON}
	seen := 0
	for more {
		key, ok := p.str()
		if !ok || !p.colon() {
			return nil, false
		}
		bit, ok := p.headerField(c, key)
		if !ok || seen&bit != 0 {
			return nil, false // a duplicate field leaves merging rules to encoding/json
		}
		seen |= bit
		if more, ok = p.next('}'); !ok {
			return nil, false
		}
	}
	p.ws()
	return c, p.i == len(p.b)
}

// headerField reads the value of the top-level field key into c and
// returns the field's seen bit, 0 for a field the header does not know
// (whose value is skipped).
func (p *fastParser) headerField(c *Command, key []byte) (bit int, ok bool) {
	switch string(key) {
	case "code":
		n, ok := p.integer(-1<<15, 1<<15-1)
		c.Code = int16(n)
		return seenCode, ok
	case "language":
		s, _, ok := p.lenient()
		c.Language = s
		return seenLanguage, ok
	case "version":
		return seenVersion, p.int32Into(&c.Version)
	case "opaque":
		return seenOpaque, p.int32Into(&c.Opaque)
	case "flag":
		return seenFlag, p.int32Into(&c.Flag)
	case "remark":
		if p.lit("null") {
			return seenRemark, true
		}
		s, ok := p.strString()
		c.Remark = s
		return seenRemark, ok
	case "extFields":
		if p.lit("null") {
			return seenExtFields, true
		}
		m, ok := p.extFields()
		c.ExtFields = m
		return seenExtFields, ok
	}
	// encoding/json matches field names case-insensitively (with Unicode
	// folding); leave any such key to it.
	if foldsToKnownField(key) {
		return 0, false
	}
	return 0, p.skip(0)
}

var knownFields = [...]string{"code", "language", "version", "opaque", "flag", "remark", "extFields"}

// foldsToKnownField reports whether encoding/json might match key to one of
// the header's fields: any non-ASCII key (Unicode folding, e.g. the Kelvin
// sign folds to 'k') or an ASCII case-insensitive match.
func foldsToKnownField(key []byte) bool {
	for _, b := range key {
		if b >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range knownFields {
		if len(f) == len(key) && strings.EqualFold(f, string(key)) {
			return true
		}
	}
	return false
}

// extFields parses an object of extension fields into Fields, each key and
// value a substring of the header where no escape forces a copy, in
// arrival order; a repeated key is appended again, and Fields.Get returns
// the last, as decodeJSONHeaderStd's map does. It declines on a null value
// (which removes the key in decodeJSONHeaderStd: deleting here would make
// a header of many nulls quadratic).
func (p *fastParser) extFields() (Fields, bool) {
	more, ok := p.open('{', '}')
	if !ok || !more {
		return nil, ok
	}
	f := make(Fields, 0, 16) // a send header has 13
	for more {
		key, ok := p.strString()
		if !ok || !p.colon() {
			return nil, false
		}
		v, null, ok := p.lenient()
		if !ok || null {
			return nil, false
		}
		f = append(f, Field{key, v})
		if more, ok = p.next('}'); !ok {
			return nil, false
		}
	}
	return f, true
}

// lenient reads any JSON value and turns it into a string as
// jsonLenientString does: a string is unquoted, null gives ("", true), any
// other value is its raw text.
func (p *fastParser) lenient() (s string, null, ok bool) {
	if p.i >= len(p.b) {
		return "", false, false
	}
	switch p.b[p.i] {
	case '"':
		v, ok := p.strString()
		if !ok {
			return "", false, false
		}
		return internValue(v), false, true
	case 'n':
		if p.lit("null") {
			return "", true, true
		}
		return "", false, false
	}
	start := p.i
	if !p.skip(0) {
		return "", false, false
	}
	return p.s[start:p.i], false, true
}

// internValue returns the shared copy of the language names and one-digit
// values that fill most headers, so that values kept long (in registries)
// do not pin the header they were cut from.
func internValue(v string) string {
	switch v {
	case "GO":
		return "GO"
	case "JAVA":
		return "JAVA"
	case "true":
		return "true"
	case "false":
		return "false"
	}
	if len(v) == 1 && v[0] >= '0' && v[0] <= '9' {
		return digitStrings[v[0]-'0']
	}
	return v
}

var digitStrings = [10]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
