package filter

import "sync"

// DefaultCacheSize is the number of distinct expressions a Cache built
// with size 0 keeps.
const DefaultCacheSize = 256

// Cache compiles each distinct expression once and keeps the result, the
// error included, so that neither a heartbeat nor a pull compiles it again.
// It holds at most its size of expressions; past that, adding one drops an
// arbitrary other. A Cache is safe for concurrent use; the zero value is
// not ready: use NewCache.
type Cache struct {
	mu   sync.Mutex
	size int
	m    map[string]compiled
}

type compiled struct {
	sel *Selector
	err error
}

// NewCache returns a cache of at most size expressions (DefaultCacheSize
// when size <= 0).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache{size: size, m: make(map[string]compiled)}
}

// Compile returns Compile(expr)'s result, compiling expr only if the cache
// does not hold it. hit reports that it did.
func (c *Cache) Compile(expr string) (sel *Selector, hit bool, err error) {
	c.mu.Lock()
	e, ok := c.m[expr]
	c.mu.Unlock()
	if ok {
		return e.sel, true, e.err
	}
	sel, err = Compile(expr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.size {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[expr] = compiled{sel, err}
	return sel, false, err
}

// Len returns the number of expressions held.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
