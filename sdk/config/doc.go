// Package config is what a keel plugin needs to read its configuration as
// strictly as the host reads the profile: the value types Duration ("500ms",
// "72h"), Size ("4MiB", "1GiB", or a byte count) and Ratio (0.75 or "75%"),
// and DecodeSection, which decodes a plugin's `<section>.config` table out
// of the whole profile document with errors that give FILE:LINE:COL, the
// key's dotted path and what is allowed:
//
//	profiles/x.toml:12:12: flush.config.interval: invalid duration "5 parsecs" (want e.g. "500ms", "2s")
//
// Plugins usually call it through sdk.Config.Decode. The host's profile
// loader (host/profile) uses the same code for its own sections through
// Source, so a plugin's errors and the host's look alike.
//
// The package depends only on the standard library and go-toml; it does not
// import sdk, so sdk can import it.
package config
