//go:build !race

package vfs

import "bytes"

// The raw* helpers touch the volatile contents of CrashFS files, which
// callers may be storing into through a Mapping at the same time (exactly as
// they may with a real shared mapping). Without the race detector they are
// the builtins; raw_race.go has uninstrumented versions.

// rawCopy is copy for volatile file contents.
func rawCopy(dst, src []byte) int { return copy(dst, src) }

// rawEqual is bytes.Equal for volatile file contents.
func rawEqual(a, b []byte) bool { return bytes.Equal(a, b) }

// rawClear is clear for volatile file contents.
func rawClear(b []byte) { clear(b) }
