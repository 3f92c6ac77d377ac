package config

import "fmt"

// ValueError returns the *Error for a value of a plugin's table that the
// plugin's own validation rejects after DecodeSection accepted it (a value
// out of range, or inconsistent with another key), placed where the value
// in force came from, as DecodeSection places its own errors:
//
//	FILE:LINE:COL: SECTION.config.KEY: MSG     the document set it (LINE:COL of the value)
//	FILE: --set ARG: SECTION.config.KEY: MSG   an override set it (ARG as the user gave it)
//	FILE: SECTION.config.KEY: MSG              neither did: it is the plugin's default
//
// file, doc and section are what DecodeSection was given (a plugin passes
// its sdk.Config's File, Document and Section); key is the key's dotted
// path inside the table ("wait_replicas", `retry.backoff`, TOML key
// syntax); msg is fmt.Sprintf(format, args...) and should say what is
// wrong and what is allowed ("9 is not allowed: want 1 to 3").
//
// The value in force is found with DecodeSection's rules for overrides:
// the last override that sets the key (alone, or inside a table it sets)
// wins; an override of the whole table (SECTION.config={...}) hides the
// document and the overrides before it, so a key it does not set is a
// default. A doc that does not parse, or a key that is not a TOML key,
// gives the third form. ValueError never fails and does not retain doc.
func ValueError(file string, doc []byte, section, key, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	cfgPath := []string{section, "config"}
	rel, err := ParseKey(key)
	if err != nil {
		return &Error{File: file, Key: section + ".config." + key, Msg: msg}
	}
	path := append([]string{section, "config"}, rel...)
	e := &Error{File: file, Key: FormatKey(path), Msg: msg}
	base, serr := newSource(file, doc, "")
	if serr != nil {
		return e
	}
	overrides, oerr := base.overrides()
	if oerr != nil {
		return e
	}
	// Overrides up to and including the last one of the whole table can
	// set the key; the document only when there is no such override.
	first := 0
	for i, ov := range overrides {
		if equalPath(ov.path, cfgPath) {
			first = i
		}
	}
	for i := len(overrides) - 1; i >= first; i-- {
		ov := overrides[i]
		if !equalPath(ov.path, cfgPath) && !hasPrefix(ov.path, cfgPath) && !hasPrefix(cfgPath, ov.path) {
			continue
		}
		if pos, ok := ov.src.idx.valuePos(path); ok {
			return ov.src.errAt(pos, path, msg)
		}
		if equalPath(ov.path, cfgPath) {
			return e // the table it replaces does not set the key: a default
		}
	}
	if pos, ok := base.idx.valuePos(path); ok {
		return base.errAt(pos, path, msg)
	}
	return e
}
