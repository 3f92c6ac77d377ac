package profile

import (
	"fmt"

	"github.com/keelmq/keel/sdk/config"
)

// Errorf returns an *Error about the key dottedKey ("flush.config.interval"),
// placed where its value was set: at the value in the file, at the --set
// override that set it last, or with no position when the key holds its
// default. Plugins use it to report validation failures after
// DecodePluginConfig with the same precision as decoding errors.
func (p *Profile) Errorf(dottedKey string, format string, args ...any) error {
	path, err := config.ParseKey(dottedKey)
	if err != nil {
		return &Error{File: p.File, Key: dottedKey, Msg: fmt.Sprintf(format, args...)}
	}
	return p.errorAt(path, fmt.Sprintf(format, args...))
}

func (p *Profile) errorAt(path []string, msg string) *Error {
	for i := len(p.overlays) - 1; i >= 0; i-- {
		if hasPrefix(path, p.overlays[i].path) {
			return &Error{File: p.File, Override: p.overlays[i].src.Override(), Key: config.FormatKey(path), Msg: msg}
		}
	}
	e := &Error{File: p.File, Key: config.FormatKey(path), Msg: msg}
	if line, col, ok := p.src.ValuePos(path); ok {
		e.Line, e.Col = line, col
	}
	return e
}

// blame picks which of two related keys a relational error is reported on:
// the one set last (an override beats the file, a later key in the file beats
// an earlier one), or the first when the user set neither.
func (p *Profile) blame(a, b string) string {
	pa, _ := config.ParseKey(a)
	pb, _ := config.ParseKey(b)
	rank := func(path []string) int {
		for i := len(p.overlays) - 1; i >= 0; i-- {
			if hasPrefix(path, p.overlays[i].path) {
				return 1<<30 + i
			}
		}
		if n, ok := p.src.Order(path); ok {
			return 1 + n
		}
		return 0
	}
	if rank(pb) > rank(pa) {
		return b
	}
	return a
}
