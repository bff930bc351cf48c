package boltstore

import (
	"encoding/binary"
	"fmt"
)

// walkPages checks the page structure of a bbolt file image (b, the whole
// file) with bounds checks on every length and page number, before bbolt's
// own Tx.Check reads it: Tx.Check trusts element counts and overflow
// lengths and runs in a goroutine of its own, where a damaged header makes
// it fault (killing the process) or loop for billions of steps (a flipped
// freelist overflow). It follows bbolt's file format version 2 (see meta.go
// and bbolt's internal/common): from the newer meta page, the freelist and
// every bucket's B+tree, inline buckets included. It returns at most max
// problems.
func walkPages(b []byte, max int) []string {
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < max {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	if len(b) < pageHeaderSize+metaSize {
		return []string{"file shorter than a meta page"}
	}
	m0, err := parseMeta(b)
	if err != nil {
		return []string{fmt.Sprintf("meta page 0: %v", err)}
	}
	ps := uint64(m0.pageSize)
	if uint64(len(b)) < ps+pageHeaderSize+metaSize {
		return []string{"file shorter than two meta pages"}
	}
	meta := b[pageHeaderSize:]
	if m1, err := parseMeta(b[ps:]); err != nil {
		return []string{fmt.Sprintf("meta page 1: %v", err)}
	} else if m1.txid > m0.txid {
		meta = b[ps+pageHeaderSize:]
	}
	le := binary.LittleEndian
	root, freelist, hwm := le.Uint64(meta[16:]), le.Uint64(meta[32:]), le.Uint64(meta[40:])
	if hwm < 2 || hwm > uint64(len(b))/ps {
		return []string{fmt.Sprintf("high-water mark %d outside the file's %d pages", hwm, uint64(len(b))/ps)}
	}
	seen := map[uint64]bool{0: true, 1: true}
	// page returns the bytes of page id with its overflow, or nil.
	page := func(id uint64, want uint16) []byte {
		if id < 2 || id >= hwm {
			add("page %d: outside the file's pages [2, %d)", id, hwm)
			return nil
		}
		p := b[id*ps:]
		if got := le.Uint64(p); got != id {
			add("page %d: header says page %d", id, got)
			return nil
		}
		flags, over := le.Uint16(p[8:]), uint64(le.Uint32(p[12:]))
		if flags&want == 0 {
			add("page %d: type %#x, want %#x", id, flags, want)
			return nil
		}
		if over >= hwm-id {
			add("page %d: overflow %d pages past the high-water mark", id, over)
			return nil
		}
		for i := id; i <= id+over; i++ {
			if seen[i] {
				add("page %d: referenced twice", i)
				return nil
			}
			seen[i] = true
		}
		return p[:(over+1)*ps]
	}
	const (
		branchFlag   = 0x01
		leafFlag     = 0x02
		freelistFlag = 0x10
		bucketLeaf   = 0x01
		elemSize     = 16
		bucketHeader = 16 // root page and sequence
	)
	if freelist != ^uint64(0) {
		if p := page(freelist, freelistFlag); p != nil {
			n, start := uint64(le.Uint16(p[10:])), uint64(pageHeaderSize)
			if n == 0xFFFF { // the count overflows into the first element
				n, start = le.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
			}
			if n > (uint64(len(p))-start)/8 {
				add("freelist page %d: %d ids do not fit", freelist, n)
			} else {
				for i := range n {
					if id := le.Uint64(p[start+8*i:]); id < 2 || id >= hwm {
						add("freelist page %d: free page %d outside [2, %d)", freelist, id, hwm)
						break
					}
				}
			}
		}
	}
	// node checks one branch or leaf page image p (a page, or an inline
	// bucket's page inside a value) and walks what it refers to.
	var node func(p []byte, where string, depth int)
	var bucket func(v []byte, where string, depth int)
	// Inline buckets live in values whose ranges a damaged page may make
	// overlap, so bound the elements visited by what the file can hold.
	budget := uint64(len(b))/elemSize + 1
	node = func(p []byte, where string, depth int) {
		if depth > 64 {
			add("%s: tree deeper than 64 levels", where)
			return
		}
		if len(p) < pageHeaderSize {
			add("%s: page shorter than its header", where)
			return
		}
		flags, n := le.Uint16(p[8:]), uint64(le.Uint16(p[10:]))
		if n > (uint64(len(p))-pageHeaderSize)/elemSize {
			add("%s: %d elements do not fit in %d bytes", where, n, len(p))
			return
		}
		if n > budget {
			add("%s: more elements than the file can hold", where)
			budget = 0
			return
		}
		budget -= n
		for i := range n {
			e := pageHeaderSize + i*elemSize
			switch {
			case flags&branchFlag != 0:
				pos, ksize, child := uint64(le.Uint32(p[e:])), uint64(le.Uint32(p[e+4:])), le.Uint64(p[e+8:])
				if e+pos+ksize > uint64(len(p)) {
					add("%s: branch element %d outside its page", where, i)
					return
				}
				if c := page(child, branchFlag|leafFlag); c != nil {
					node(c, fmt.Sprintf("page %d", child), depth+1)
				}
			case flags&leafFlag != 0:
				ef, pos, ksize, vsize := le.Uint32(p[e:]), uint64(le.Uint32(p[e+4:])), uint64(le.Uint32(p[e+8:])), uint64(le.Uint32(p[e+12:]))
				if e+pos+ksize+vsize > uint64(len(p)) {
					add("%s: leaf element %d outside its page", where, i)
					return
				}
				if ef&bucketLeaf != 0 {
					k := p[e+pos : e+pos+ksize]
					bucket(p[e+pos+ksize:e+pos+ksize+vsize], fmt.Sprintf("%s bucket %q", where, k), depth+1)
				}
			default:
				add("%s: type %#x is neither branch nor leaf", where, flags)
				return
			}
		}
	}
	bucket = func(v []byte, where string, depth int) {
		if len(v) < bucketHeader {
			add("%s: bucket header of %d bytes", where, len(v))
			return
		}
		if r := le.Uint64(v); r != 0 {
			if p := page(r, branchFlag|leafFlag); p != nil {
				node(p, where, depth)
			}
			return
		}
		node(v[bucketHeader:], where+" (inline)", depth) // an inline bucket's page follows its header
	}
	if p := page(root, branchFlag|leafFlag); p != nil {
		node(p, "root", 0)
	}
	return problems
}
