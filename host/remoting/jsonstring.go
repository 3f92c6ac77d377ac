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
		dst, i = appendJSONChar(dst, s, i)
	}
	return append(dst, '"')
}

// appendJSONChar appends the character of s that starts at byte i as it
// stands inside a JSON string literal, escaped where appendJSONString says,
// and returns the index of the byte after it.
func appendJSONChar(dst []byte, s string, i int) ([]byte, int) {
	if b := s[i]; b < utf8.RuneSelf {
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
		return dst, i + 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && size == 1:
		dst = append(dst, `\ufffd`...)
	case r == '\u2028' || r == '\u2029':
		dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
	default:
		dst = append(dst, s[i:i+size]...)
	}
	return dst, i + size
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
