package profile

import (
	"bytes"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// span is a byte range [from, to) of a TOML document.
type span struct{ from, to int }

// pluginTable returns the part of the TOML document doc that defines the
// table <section>.config, and nothing else, at the same lines and columns:
// every byte that belongs to that table (its [<section>.config] and
// [<section>.config.*] headers and their key-values, dotted keys such as
// config.interval under [<section>], an inline config = {...}) is kept where
// it is; every other byte is blanked (a space, so that what follows on the
// line keeps its column) and trailing blanks are cut, so a line that held
// something else is an empty line. Newlines are always kept. The [<section>]
// header is kept when a key under it is; in an inline table of the whole
// section (<section> = {plugin = "x", config = {...}}) only the braces, the
// key and the config entries are.
//
// Decoding the result with config.DecodeSection gives what decoding doc
// gives, with the same positions in errors: no key outside <section>.config
// (another section, a secret) is left in it. A document that does not parse
// yields the table's parts before the syntax error. pluginTable never
// modifies doc.
func pluginTable(doc []byte, section string) []byte {
	return blankOutside(doc, tableSpans(doc, section))
}

// tableSpans returns the byte ranges of doc that pluginTable keeps, in
// document order.
func tableSpans(doc []byte, section string) []span {
	cfg := []string{section, "config"}
	var out []span
	var p unstable.Parser
	p.Reset(doc)
	var header []string
	var pending *span // a [<section>] header, kept once a key under it is
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			header = keyPath(nil, e)
			h := headerSpan(doc, e)
			pending = nil
			switch {
			case hasPrefix(header, cfg):
				out = append(out, h)
			case hasPrefix(cfg, header):
				pending = &h
			}
		case unstable.KeyValue:
			kv := keyValueSpans(doc, e, keyPath(header, e), cfg)
			if len(kv) > 0 && pending != nil {
				out = append(out, *pending)
				pending = nil
			}
			out = append(out, kv...)
		}
	}
	return out
}

// keyValueSpans returns what of the key-value e, whose full path is path,
// belongs to the table cfg: all of it when path is in cfg; when path is
// above cfg and its value an inline table, the key up to the opening brace,
// the entries in cfg with the commas between them, and the closing brace;
// else nothing.
func keyValueSpans(doc []byte, e *unstable.Node, path, cfg []string) []span {
	if hasPrefix(path, cfg) {
		return []span{rawSpan(e)}
	}
	v := e.Value()
	if !hasPrefix(cfg, path) || v.Kind != unstable.InlineTable {
		return nil
	}
	var kept []span
	c := v.Children()
	for c.Next() {
		kv := c.Node()
		if kv.Kind == unstable.KeyValue && hasPrefix(keyPath(path, kv), cfg) {
			if len(kept) > 0 {
				kept = append(kept, commaAfter(doc, kept[len(kept)-1].to))
			}
			kept = append(kept, rawSpan(kv))
		}
	}
	if len(kept) == 0 {
		return nil
	}
	whole := rawSpan(e)
	open := span{whole.from, int(v.Raw.Offset) + 1}
	closing := span{whole.to - 1, whole.to}
	return append(append([]span{open}, kept...), closing)
}

// keyPath returns prefix followed by the parts of the key of e (a
// key-value or a table header), in a new slice.
func keyPath(prefix []string, e *unstable.Node) []string {
	path := slices.Clone(prefix)
	it := e.Key()
	for it.Next() {
		path = append(path, string(it.Node().Data))
	}
	return path
}

// rawSpan returns the range of a key-value: from its key to the end of its
// value.
func rawSpan(e *unstable.Node) span {
	return span{int(e.Raw.Offset), int(e.Raw.Offset + e.Raw.Length)}
}

// headerSpan returns the range of a table header, [key] or [[key]],
// brackets included. The parser records only the key's parts, so the
// brackets are found around them: only blanks and '[' precede the key, only
// blanks and ']' follow it.
func headerSpan(doc []byte, e *unstable.Node) span {
	from, to := -1, 0
	it := e.Key()
	for it.Next() {
		r := it.Node().Raw
		if from < 0 {
			from = int(r.Offset)
		}
		to = int(r.Offset + r.Length)
	}
	from = max(from, 0)
	for from > 0 && (doc[from-1] == '[' || doc[from-1] == ' ' || doc[from-1] == '\t') {
		from--
	}
	for to < len(doc) && (doc[to] == ']' || doc[to] == ' ' || doc[to] == '\t') {
		to++
	}
	return span{from, to}
}

// commaAfter returns the range of the comma that ends the inline-table entry
// ending at offset: the first ',' after it, skipping blanks, newlines and
// comments. It returns an empty range if there is none.
func commaAfter(doc []byte, offset int) span {
	for i := offset; i < len(doc); i++ {
		switch doc[i] {
		case ' ', '\t', '\r', '\n':
		case '#':
			for i < len(doc) && doc[i] != '\n' {
				i++
			}
		case ',':
			return span{i, i + 1}
		default:
			return span{offset, offset}
		}
	}
	return span{offset, offset}
}

// blankOutside returns a copy of doc in which every byte outside spans is a
// space, except newlines, and each line is cut after its last byte inside
// spans.
func blankOutside(doc []byte, spans []span) []byte {
	keep := make([]bool, len(doc))
	for _, s := range spans {
		for i := max(s.from, 0); i < min(s.to, len(doc)); i++ {
			keep[i] = true
		}
	}
	out := make([]byte, 0, len(doc))
	for start := 0; start < len(doc); {
		end := bytes.IndexByte(doc[start:], '\n')
		if end < 0 {
			end = len(doc)
		} else {
			end += start
		}
		last := end - 1
		for last >= start && !keep[last] {
			last--
		}
		for i := start; i <= last; i++ {
			if keep[i] {
				out = append(out, doc[i])
			} else {
				out = append(out, ' ')
			}
		}
		if end < len(doc) {
			out = append(out, '\n')
		}
		start = end + 1
	}
	return out
}

// joinSpans returns the text of spans of doc joined by single spaces: the
// kept parts of a one-line --set document without the blanks between them.
func joinSpans(doc []byte, spans []span) []byte {
	var out []byte
	for i, s := range spans {
		if s.from >= s.to {
			continue
		}
		if i > 0 && len(out) > 0 {
			out = append(out, ' ')
		}
		out = append(out, doc[max(s.from, 0):min(s.to, len(doc))]...)
	}
	return out
}
