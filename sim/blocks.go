package sim

// blockPool is the KV block manager of one engine replica: a fixed number of
// blocks, reference counts, and (with prefix caching) a hash of the tokens
// each full block holds. Free blocks form an LRU list; a freed block keeps
// its hash until it is reused, so a request that comes back soon (a shared
// prefix, a preempted request) finds its blocks again, as in vLLM V1's
// KVCacheManager. All state lives in flat slices: no allocation per token.
type blockPool struct {
	ref        []int32
	key        []uint64 // 0: no hash
	prev, next []int32  // free list links, -1 terminated
	head, tail int32    // head is evicted first
	free       int
	caching    bool
	cache      map[uint64]int32
}

func newBlockPool(n int, caching bool) *blockPool {
	p := &blockPool{
		ref: make([]int32, n), key: make([]uint64, n),
		prev: make([]int32, n), next: make([]int32, n),
		head: -1, tail: -1, caching: caching,
	}
	if caching {
		p.cache = make(map[uint64]int32, n)
	}
	for i := 0; i < n; i++ {
		p.pushTail(int32(i))
	}
	return p
}

func (p *blockPool) total() int { return len(p.ref) }

func (p *blockPool) pushTail(b int32) {
	p.prev[b], p.next[b] = p.tail, -1
	if p.tail >= 0 {
		p.next[p.tail] = b
	} else {
		p.head = b
	}
	p.tail = b
	p.free++
}

func (p *blockPool) unlink(b int32) {
	if p.prev[b] >= 0 {
		p.next[p.prev[b]] = p.next[b]
	} else {
		p.head = p.next[b]
	}
	if p.next[b] >= 0 {
		p.prev[p.next[b]] = p.prev[b]
	} else {
		p.tail = p.prev[b]
	}
	p.prev[b], p.next[b] = -1, -1
	p.free--
}

// alloc takes the least recently freed block, evicting its cached hash.
// The caller checks p.free first.
func (p *blockPool) alloc() int32 {
	b := p.head
	p.unlink(b)
	if k := p.key[b]; k != 0 {
		if p.cache[k] == b {
			delete(p.cache, k)
		}
		p.key[b] = 0
	}
	p.ref[b] = 1
	return b
}

// release drops one reference; a block without references joins the free
// list (keeping its hash for later hits).
func (p *blockPool) release(b int32) {
	p.ref[b]--
	if p.ref[b] == 0 {
		if !p.caching {
			p.key[b] = 0
		}
		p.pushTail(b)
	}
}

// lookup returns the cached block holding key, or -1.
func (p *blockPool) lookup(key uint64) int32 {
	if !p.caching {
		return -1
	}
	if b, ok := p.cache[key]; ok {
		return b
	}
	return -1
}

// touch takes a reference on a cached block (removing it from the free list).
func (p *blockPool) touch(b int32) {
	if p.ref[b] == 0 {
		p.unlink(b)
	}
	p.ref[b]++
}

// register records that block b now holds the full block identified by key.
// When another block already holds the same content, the first one stays
// the cached copy (vLLM keeps duplicates uncached too).
func (p *blockPool) register(b int32, key uint64) {
	if !p.caching || key == 0 {
		return
	}
	if _, ok := p.cache[key]; ok {
		return
	}
	p.key[b] = key
	p.cache[key] = b
}

// used is the fraction of blocks in use; cached-but-free blocks count as
// free, as for vllm:kv_cache_usage_perc.
func (p *blockPool) used() float64 {
	if len(p.ref) == 0 {
		return 0
	}
	return 1 - float64(p.free)/float64(len(p.ref))
}
