package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/keelmq/keel/host/remoting"
)

// header reads a request's extension fields, keeping the first error.
type header struct {
	cmd *remoting.Command
	err error
}

func (h *header) str(k string) string { return h.cmd.Ext(k) }

func (h *header) required(k string) string {
	v := h.cmd.Ext(k)
	if v == "" && h.err == nil {
		h.err = fmt.Errorf("%w: header field %s is missing", ErrInvalidRequest, k)
	}
	return v
}

// int reads an integer field of the given bit size; a missing or empty
// field is def.
func (h *header) int(k string, bits int, def int64) int64 {
	v := strings.TrimSpace(h.cmd.Ext(k))
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		if h.err == nil {
			h.err = fmt.Errorf("%w: header field %s=%q is not an int%d", ErrInvalidRequest, k, v, bits)
		}
		return def
	}
	return n
}

func (h *header) bool(k string) bool {
	v := h.cmd.Ext(k)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil && h.err == nil {
		h.err = fmt.Errorf("%w: header field %s=%q is not a boolean", ErrInvalidRequest, k, v)
	}
	return b
}

func i64s(n int64) string { return strconv.FormatInt(n, 10) }
