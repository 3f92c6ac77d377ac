package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// position is a 1-based line and column (column counted in bytes, as go-toml
// does). The zero value means "no position".
type position struct {
	Line, Col int
}

// entry is one key the document defines: a key-value (also inside an inline
// table) or a table header.
type entry struct {
	path    []string      // full dotted path, table header included; array indices are not part of it
	partPos []position    // position of each part of path's key token
	valPos  position      // position of the value (key-values) or of the header key (tables)
	kind    unstable.Kind // kind of the value, or Table / ArrayTable for headers
	expr    int           // index of the top-level expression that defines it
	text    string        // the value's text (string content or literal) for scalar values
	raw     string        // the value's source text, for scalar values
}

// docIndex records where every key of a TOML document is, so errors found
// after decoding can still name a line and column.
type docIndex struct {
	entries []entry
	// cuts[i] is the byte offset just past the line on which top-level
	// expression i ends: doc[:cuts[i]] is a valid document holding
	// expressions 0..i.
	cuts []int
}

// lineIndex converts byte offsets to positions.
type lineIndex []int // byte offset of the start of each line

func newLineIndex(doc []byte) lineIndex {
	li := lineIndex{0}
	for i, c := range doc {
		if c == '\n' {
			li = append(li, i+1)
		}
	}
	return li
}

func (li lineIndex) at(offset int) position {
	n := sort.Search(len(li), func(i int) bool { return li[i] > offset }) - 1
	if n < 0 {
		n = 0
	}
	return position{Line: n + 1, Col: offset - li[n] + 1}
}

// indexDocument parses doc and records its keys. On a syntax error it returns
// the index of the expressions before the error and the parser's error.
func indexDocument(doc []byte) (*docIndex, error) {
	li := newLineIndex(doc)
	idx := &docIndex{}
	var p unstable.Parser
	p.Reset(doc)
	var header []string
	var headerPos []position
	for p.NextExpression() {
		e := p.Expression()
		n := len(idx.cuts)
		end := 0
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			header, headerPos = nil, nil
			it := e.Key()
			for it.Next() {
				k := it.Node()
				header = append(header, string(k.Data))
				headerPos = append(headerPos, li.at(int(k.Raw.Offset)))
				end = int(k.Raw.Offset + k.Raw.Length)
			}
			idx.entries = append(idx.entries, entry{
				path: header, partPos: headerPos, valPos: headerPos[0], kind: e.Kind, expr: n,
			})
		case unstable.KeyValue:
			idx.addKeyValue(&p, li, e, header, headerPos, n)
			end = int(e.Raw.Offset + e.Raw.Length)
		default:
			continue
		}
		cut := len(doc)
		if end <= len(doc) {
			if nl := strings.IndexByte(string(doc[end:]), '\n'); nl >= 0 {
				cut = end + nl + 1
			}
		}
		idx.cuts = append(idx.cuts, cut)
	}
	return idx, p.Error()
}

// addKeyValue records a key-value and, for inline tables, its content.
func (idx *docIndex) addKeyValue(p *unstable.Parser, li lineIndex, e *unstable.Node, prefix []string, prefixPos []position, expr int) {
	path := append([]string(nil), prefix...)
	partPos := append([]position(nil), prefixPos...)
	it := e.Key()
	for it.Next() {
		k := it.Node()
		path = append(path, string(k.Data))
		partPos = append(partPos, li.at(int(k.Raw.Offset)))
	}
	v := e.Value()
	ent := entry{path: path, partPos: partPos, valPos: li.at(int(v.Raw.Offset)), kind: v.Kind, expr: expr}
	if v.Raw.Length == 0 && len(partPos) > 0 {
		// The parser gives an array no raw range: point at its key.
		ent.valPos = partPos[len(partPos)-1]
	}
	switch v.Kind {
	case unstable.InlineTable, unstable.Array:
	default:
		ent.text = string(v.Data)
		ent.raw = string(p.Raw(v.Raw))
	}
	idx.entries = append(idx.entries, ent)
	if v.Kind == unstable.InlineTable {
		c := v.Children()
		for c.Next() {
			if c.Node().Kind == unstable.KeyValue {
				idx.addKeyValue(p, li, c.Node(), path, partPos, expr)
			}
		}
	}
}

// find returns the first entry (in document order) that defines path or a
// key below it, and the index of path's last part in it. ok is false when the
// document does not mention path.
func (idx *docIndex) find(path []string) (ent *entry, ok bool) {
	if idx == nil || len(path) == 0 {
		return nil, false
	}
	for i := range idx.entries {
		e := &idx.entries[i]
		if hasPrefix(e.path, path) {
			return e, true
		}
	}
	return nil, false
}

// exact returns the first entry whose path is exactly path.
func (idx *docIndex) exact(path []string) (*entry, bool) {
	if idx == nil {
		return nil, false
	}
	for i := range idx.entries {
		if equalPath(idx.entries[i].path, path) {
			return &idx.entries[i], true
		}
	}
	return nil, false
}

// keyPos returns the position of path's last key part in the document.
func (idx *docIndex) keyPos(path []string) (position, bool) {
	e, ok := idx.find(path)
	if !ok {
		return position{}, false
	}
	return e.partPos[len(path)-1], true
}

// valuePos returns the position of the value of path if the document sets it
// with a key-value, else the position of its key.
func (idx *docIndex) valuePos(path []string) (position, bool) {
	if e, ok := idx.exact(path); ok {
		return e.valPos, true
	}
	return idx.keyPos(path)
}

// children returns the distinct names of the keys directly below path, in
// document order.
func (idx *docIndex) children(path []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range idx.entries {
		if len(e.path) > len(path) && hasPrefix(e.path, path) {
			name := e.path[len(path)]
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// KeyPosition returns the line and column (1-based, column in bytes) of the
// key dottedKey in the TOML document doc: the first place, in document order,
// that defines the key or a key below it (a table header [store] defines
// "store"; "flush.config.interval = ..." defines "flush" and "flush.config").
// dottedKey uses TOML key syntax, so parts with dots or spaces are quoted:
// `a."b.c"`. Array-of-tables indices are not part of the path. ok is false
// when the key does not occur or dottedKey is not a valid key. A syntax error
// in doc hides the keys after it.
func KeyPosition(doc []byte, dottedKey string) (line, col int, ok bool) {
	path, err := ParseKey(dottedKey)
	if err != nil {
		return 0, 0, false
	}
	idx, _ := indexDocument(doc)
	p, ok := idx.keyPos(path)
	return p.Line, p.Col, ok
}

// ParseKey splits a TOML dotted key into its parts: `store.segment_size`
// gives [store segment_size], `a."b.c"` gives [a b.c]. Whitespace around the
// parts is allowed, as in TOML. An empty string, an empty part and anything
// that is not a TOML key are errors.
func ParseKey(s string) ([]string, error) {
	if strings.ContainsAny(s, "\n\r=#") && !strings.ContainsAny(s, `"'`) {
		return nil, fmt.Errorf("invalid key %q", s)
	}
	doc := []byte(s + " = 0")
	var p unstable.Parser
	p.Reset(doc)
	if !p.NextExpression() || p.Expression().Kind != unstable.KeyValue {
		return nil, fmt.Errorf("invalid key %q", s)
	}
	var parts []string
	it := p.Expression().Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	v := p.Expression().Value()
	if v.Kind != unstable.Integer || string(v.Data) != "0" || p.NextExpression() || p.Error() != nil {
		return nil, fmt.Errorf("invalid key %q", s)
	}
	return parts, nil
}

// FormatKey joins path into a dotted key, quoting parts that are not bare
// keys: the inverse of ParseKey, and the form errors name keys in.
func FormatKey(path []string) string {
	var b strings.Builder
	for i, part := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(part) {
			b.WriteString(part)
		} else {
			b.WriteString(Quote(part))
		}
	}
	return b.String()
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Quote returns s as a TOML basic string (double-quoted, with escapes).
// Invalid UTF-8 in s becomes U+FFFD, since TOML strings are UTF-8.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		case r == 0xFFFD:
			// Invalid UTF-8 decodes to U+FFFD; TOML strings must be valid
			// UTF-8, so write the replacement character itself.
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hasPrefix(path, prefix []string) bool {
	if len(path) < len(prefix) {
		return false
	}
	for i := range prefix {
		if path[i] != prefix[i] {
			return false
		}
	}
	return true
}

func equalPath(a, b []string) bool {
	return len(a) == len(b) && hasPrefix(a, b)
}

// parserErrorPos returns the position of a go-toml parser error in doc, if
// its highlight is a subslice of doc.
func parserErrorPos(doc []byte, err error) (position, string, bool) {
	var pe *unstable.ParserError
	if !errors.As(err, &pe) {
		return position{}, err.Error(), false
	}
	if pe.Highlight == nil {
		return position{}, pe.Message, false
	}
	off := cap(doc) - cap(pe.Highlight)
	if off < 0 || off > len(doc) {
		return position{}, pe.Message, false
	}
	return newLineIndex(doc).at(off), pe.Message, true
}
