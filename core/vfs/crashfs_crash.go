package vfs

import (
	"bytes"
	"maps"
	"slices"
	"syscall"
)

// Crash is CrashWith(CrashOptions{TornPages: true}): a power cut in which
// some unsynced pages reached the disk.
func (c *CrashFS) Crash() { c.CrashWith(CrashOptions{TornPages: true}) }

// CrashWith simulates a power cut followed by a reboot, in place. Afterwards:
//
//   - Every directory's entries are its durable entries (as of its last
//     SyncDir; a directory never synced is empty). Files and directories
//     reachable from "/" through durable entries exist; nothing else does.
//   - Every surviving file's contents and size are its durable contents
//     (as of its last successful Sync or Datasync; a file never synced is
//     empty), except that with opts.TornPages some pages hold the volatile
//     contents instead (see CrashOptions). Whatever was kept is now both
//     volatile and durable.
//   - Every File and Mapping obtained before the crash is detached: its
//     operations fail with an error matching ErrDetached and os.ErrClosed.
//     An old Mapping's Bytes still returns addressable memory, but it is no
//     longer the file's: stores into it change nothing.
//   - Injected faults, the fault hook, the capacity and the counters stay.
//
// Its cost is proportional to the total size of the surviving files.
// CrashWith must not run concurrently with stores into mappings.
func (c *CrashFS) CrashWith(opts CrashOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.stats.Crashes++

	// Rebuild the namespace from durable entries and count links.
	seen := map[*inode]bool{c.root: true}
	var files []*inode
	var walk func(d *inode)
	walk = func(d *inode) {
		d.children = cloneEntries(d.durableChildren)
		for _, child := range slices.Sorted(maps.Keys(d.children)) {
			n := d.children[child]
			if seen[n] {
				n.nlink++
				continue
			}
			seen[n] = true
			n.nlink, n.opens, n.maps = 1, 0, 0
			if n.dir {
				walk(n)
			} else {
				files = append(files, n)
			}
		}
	}
	walk(c.root)

	// Replace file contents; sorted walk order keeps torn choices
	// reproducible for a given seed.
	c.used = 0
	for _, n := range files {
		old := n.data
		vol := make([]byte, len(n.durable))
		copy(vol, n.durable)
		if opts.TornPages {
			c.tear(vol, old)
			copy(n.durable, vol)
		}
		n.data = vol
		n.shadow = nil
		c.used += int64(len(vol))
	}
}

// tear overwrites some pages of dur, the durable image, with the matching
// pages of vol, the volatile image (see CrashOptions.TornPages). Past the
// volatile end of file a volatile page reads as zeros, as the page cache's
// tail of the last page does.
func (c *CrashFS) tear(dur, vol []byte) {
	var page [PageSize]byte
	for p := 0; p < len(dur) && p < len(vol); p += PageSize {
		e := min(p+PageSize, len(dur))
		v := page[:e-p]
		clear(v)
		rawCopy(v, vol[p:min(e, len(vol))])
		if !bytes.Equal(v, dur[p:e]) && c.rng.IntN(2) == 1 {
			copy(dur[p:e], v)
		}
	}
}

// DurableContents returns a copy of what a crash without torn pages would
// leave in the file name: name is resolved through durable directory
// entries, and the contents are the file's durable contents. It fails with
// an *os.PathError (fs.ErrNotExist) when name would not survive.
func (c *CrashFS) DurableContents(name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.root
	for _, part := range components(canon(name)) {
		child, ok := n.durableChildren[part]
		if !n.dir || !ok {
			return nil, pathErr("durable", name, syscall.ENOENT)
		}
		n = child
	}
	if n.dir {
		return nil, pathErr("durable", name, syscall.EISDIR)
	}
	return slices.Clone(n.durable), nil
}
