package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem found in a TOML document (a profile, or a plugin's
// section of one). Its Error string is
//
//	FILE:LINE:COL: KEY: MSG                 a problem at a place in the file
//	FILE: KEY: MSG                          a problem with a default value or a missing key
//	FILE: --set OVERRIDE: KEY: MSG          a problem caused by a --set override
//
// for example
//
//	profiles/x.toml:12:12: flush.config.interval: invalid duration "5 parsecs" (want e.g. "500ms", "2s")
//
// A problem with a value points at the value; an unknown key points at the
// key. MSG says what is allowed.
type Error struct {
	// File is the document's name as its reader was given it (the
	// profile's path).
	File string
	// Line and Col locate the problem in File (1-based; Col counts bytes).
	// Both are 0 when the problem has no place in the file: a default value,
	// a missing key, or an override.
	Line, Col int
	// Override is the --set argument ("store.segment_size=1KiB") that caused
	// the problem, or "" when the file did.
	Override string
	// Key is the dotted path of the key concerned ("flush.config.interval"),
	// or "" for a problem with the whole document (a syntax error).
	Key string
	// Msg says what is wrong and what is allowed.
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Override != "" {
		b.WriteString("--set ")
		b.WriteString(e.Override)
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is several problems found in one document, in document order.
// Its Error string has one problem per line. errors.As finds the first
// *Error. A nil or empty ErrorList means no problem; use Err to turn it into
// an error value.
type ErrorList []*Error

// Error implements error.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns nil for an empty list, the single *Error for a list of one,
// and the list otherwise. Never return an ErrorList as an error without it:
// a nil ErrorList in an error interface is not a nil error.
func (l ErrorList) Err() error {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	default:
		return l
	}
}

// Sort orders the problems by position; problems without one come last, in
// the order found.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}
