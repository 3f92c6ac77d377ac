//go:build !invariants

package core

// invariants is false without -tags invariants: every `if invariants`
// block, and the assertions it calls, compile to nothing.
const invariants = false
