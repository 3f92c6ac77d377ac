package remoting

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

type jsonHeader struct {
	Code      int16                      `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   int32                      `json:"version"`
	Opaque    int32                      `json:"opaque"`
	Flag      int32                      `json:"flag"`
	Remark    *string                    `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// decodeJSONHeader decodes a JSON header, with the hand-written fast path
// when it applies (see jsonfast.go) and encoding/json otherwise. Both give
// the same result on every input the fast path accepts.
func decodeJSONHeader(h []byte) (*Command, error) {
	if c, ok := fastDecodeJSONHeader(h); ok {
		return c, nil
	}
	return decodeJSONHeaderStd(h)
}

// decodeJSONHeaderStd is the reference decoder, built on encoding/json. It
// defines the accepted language and the leniency rules.
func decodeJSONHeaderStd(h []byte) (*Command, error) {
	var jh jsonHeader
	if err := json.Unmarshal(h, &jh); err != nil {
		return nil, fmt.Errorf("decoding JSON header: %v: %w", err, ErrMalformed)
	}
	c := &Command{
		Code:          jh.Code,
		Language:      jsonLenientString(jh.Language),
		Version:       jh.Version,
		Opaque:        jh.Opaque,
		Flag:          jh.Flag,
		SerializeType: SerializeJSON,
	}
	if jh.Remark != nil {
		c.Remark = *jh.Remark
	}
	if len(jh.ExtFields) > 0 {
		c.ExtFields = make(Fields, 0, len(jh.ExtFields))
		for k, v := range jh.ExtFields {
			if isJSONNull(v) {
				continue
			}
			c.ExtFields = append(c.ExtFields, Field{k, jsonLenientString(v)})
		}
		slices.SortFunc(c.ExtFields, byKey) // map keys: already unique
	}
	return c, nil
}

// jsonLenientString turns a JSON value into a string: a JSON string is
// unquoted, anything else (a number, a bool, an object) is kept as its raw
// text, null becomes "".
func jsonLenientString(raw json.RawMessage) string {
	if len(raw) == 0 || isJSONNull(raw) {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s
		}
	}
	return string(raw)
}

func isJSONNull(raw json.RawMessage) bool {
	return len(raw) == 4 && string(raw) == "null"
}

func (c *Command) appendJSONHeader(dst []byte) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	dst = appendJSONString(dst, c.language())
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = appendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	var small [16]Field
	for i, f := range c.ExtFields.Unique(small[:0]) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, f.Key)
		dst = append(dst, ':')
		dst = appendJSONString(dst, f.Value)
	}
	dst = append(dst, `},"serializeTypeCurrentRPC":"JSON"}`...)
	return dst
}
