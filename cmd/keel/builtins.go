package main

import "github.com/keelmq/keel/internal/builtins"

// The builtin catalog (package internal/builtins, shared with keelbench):
// every plugin compiled into this binary, by the name profiles use.
func init() { builtins.Register() }
