package filter

import (
	"fmt"
	"sync"
	"testing"
)

func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(0)
	s1, hit, err := c.Compile("a = 1")
	if err != nil || hit {
		t.Fatalf("first Compile = hit %v, %v", hit, err)
	}
	s2, hit, err := c.Compile("a = 1")
	if err != nil || !hit || s1 != s2 {
		t.Fatalf("second Compile = %p hit %v, %v; want the first selector %p from the cache", s2, hit, err, s1)
	}
	_, _, err1 := c.Compile("a =")
	_, hit, err2 := c.Compile("a =")
	if err1 == nil || err2 == nil || !hit || err1 != err2 {
		t.Fatalf("a bad expression: %v then hit %v, %v; want its error kept", err1, hit, err2)
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := NewCache(8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				if _, _, err := c.Compile(fmt.Sprintf("a = %d", g*1000+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := c.Len(); n > 8 {
		t.Fatalf("cache of size 8 holds %d expressions", n)
	}
}
