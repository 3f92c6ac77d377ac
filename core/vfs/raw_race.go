//go:build race

package vfs

import "unsafe"

// Under the race detector, CrashFS must not report its own accesses to the
// volatile contents of mapped files: callers store into a Mapping without
// locks while another goroutine calls Sync, exactly as they may with a real
// shared mapping, whose memory the race detector does not track. copy, clear
// and bytes.Equal are instrumented even inside //go:norace functions (they
// go through the runtime), so these are plain loops, 8 bytes at a time.

// rawCopy is copy (memmove semantics) without race instrumentation.
//
//go:norace
//go:nocheckptr
func rawCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	d := unsafe.Pointer(unsafe.SliceData(dst))
	s := unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(d) == uintptr(s) {
		return n
	}
	if uintptr(d) > uintptr(s) && uintptr(d) < uintptr(s)+uintptr(n) {
		// Overlap with dst after src: copy backwards, byte by byte.
		for i := n - 1; i >= 0; i-- {
			*(*byte)(unsafe.Add(d, i)) = *(*byte)(unsafe.Add(s, i))
		}
		return n
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(d, i)) = *(*uint64)(unsafe.Add(s, i))
	}
	for ; i < n; i++ {
		*(*byte)(unsafe.Add(d, i)) = *(*byte)(unsafe.Add(s, i))
	}
	return n
}

// rawEqual is bytes.Equal without race instrumentation.
//
//go:norace
//go:nocheckptr
func rawEqual(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	n := len(a)
	if n == 0 {
		return true
	}
	pa := unsafe.Pointer(unsafe.SliceData(a))
	pb := unsafe.Pointer(unsafe.SliceData(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if *(*uint64)(unsafe.Add(pa, i)) != *(*uint64)(unsafe.Add(pb, i)) {
			return false
		}
	}
	for ; i < n; i++ {
		if *(*byte)(unsafe.Add(pa, i)) != *(*byte)(unsafe.Add(pb, i)) {
			return false
		}
	}
	return true
}

// rawClear is clear without race instrumentation.
//
//go:norace
//go:nocheckptr
func rawClear(b []byte) {
	n := len(b)
	if n == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(p, i)) = 0
	}
	for ; i < n; i++ {
		*(*byte)(unsafe.Add(p, i)) = 0
	}
}
