package remoting

import (
	"fmt"
	"strconv"
	"strings"
)

type extReader struct {
	cmd *Command
	err error
}

func (e *extReader) str(keys ...string) string {
	for _, k := range keys {
		if v, ok := e.cmd.ExtFields.Get(k); ok {
			return v
		}
	}
	return ""
}

func (e *extReader) int(bits int, def int64, keys ...string) int64 {
	for _, k := range keys {
		v, ok := e.cmd.ExtFields.Get(k)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
		if err != nil {
			if e.err == nil {
				e.err = fmt.Errorf("header field %s=%q is not an int%d", k, v, bits)
			}
			return def
		}
		return n
	}
	return def
}

func (e *extReader) required(keys ...string) string {
	v := e.str(keys...)
	if v == "" && e.err == nil {
		e.err = fmt.Errorf("header field %s is missing", keys[0])
	}
	return v
}

func (e *extReader) bool(keys ...string) bool {
	b, _ := strconv.ParseBool(e.str(keys...))
	return b
}

func i64s(n int64) string { return strconv.FormatInt(n, 10) }
