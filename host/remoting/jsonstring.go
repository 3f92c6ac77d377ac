package remoting

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Control characters
// (including the \x01 and \x02 property separators) are escaped as \u00XX;
// invalid UTF-8 is replaced by U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		// Copy the longest run of bytes that need no escaping at once.
		j := i
		for j < len(s) && strPlain[s[j]] {
			j++
		}
		if j > i {
			dst = append(dst, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b >= 0x20:
				dst = append(dst, b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// strPlain[b] is true for the bytes a JSON string holds as themselves:
// printable ASCII but '"' and '\\'. The decoder (str) skips them without a
// closer look, the encoder (appendJSONString) copies them verbatim.
var strPlain = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()
