//go:build invariants

package core

// invariants turns on the position assertions of invariants_check.go
// (build with -tags invariants, as pebble does).
const invariants = true
