package sim

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/vllm-tuner/tuner/spaces"
)

type reqState uint8

const (
	stateNew reqState = iota
	stateWaiting
	stateRunning
	stateDone
)

// Request is one request inside an engine core. Drivers set the exported
// fields before Add and read the progress fields; the engine owns the rest.
type Request struct {
	ID        int // the driver's index
	PromptLen int
	OutputLen int // tokens to generate (EOS already decided by the driver)
	PrefixLen int // leading prompt tokens shared with other requests
	Priority  int // lower first (priority policy)
	Adapter   int // LoRA adapter (1-based index of the engine's modules; 0: the base model)
	// PromptKeys optionally identifies the content of each full prompt block
	// (chained hashes of the token ids); without it, blocks inside PrefixLen
	// are shared and all others unique.
	PromptKeys []uint64

	Generated    int // tokens sampled so far
	Preemptions  int
	CachedTokens int // prefix-cache hits at the first admission

	uid      uint64
	seq      uint64
	computed int
	pending  int // sampled, not yet streamed (multi-step bundles)
	schedN   int
	blocks   []int32
	hashed   int
	admitted bool
	state    reqState
	live     *liveReq // set by the HTTP server
}

func (r *Request) tokens() int { return r.PromptLen + r.Generated }

// Done reports whether the request has finished.
func (r *Request) Done() bool { return r.state == stateDone }

func (r *Request) blockKey(i, bs int) uint64 {
	if i < len(r.PromptKeys) {
		return r.PromptKeys[i]
	}
	if r.PromptKeys == nil && (i+1)*bs <= r.PrefixLen {
		return uint64(i + 1)
	}
	return r.uid<<24 | uint64(i+1)
}

// Output is what one step produced for one request: Tokens new tokens to
// stream (usually 1), and whether the request finished.
type Output struct {
	Req      *Request
	Tokens   int
	First    bool
	Finished bool
}

// Stats are an engine core's counters since it started.
type Stats struct {
	Steps         int64   `json:"steps"`
	Preemptions   int64   `json:"preemptions"`
	PromptTokens  int64   `json:"prompt_tokens"` // prefill tokens computed (recompute included)
	GenTokens     int64   `json:"generation_tokens"`
	PrefixQueries int64   `json:"prefix_cache_queries"` // tokens looked up
	PrefixHits    int64   `json:"prefix_cache_hits"`    // tokens found
	MaxRunning    int     `json:"max_running"`
	MaxWaiting    int     `json:"max_waiting"`
	MaxKVUsage    float64 `json:"max_kv_usage"`
	BusyS         float64 `json:"busy_s"`
	// LoRALoads counts adapters loaded into a GPU slot (swaps included),
	// LoRADiskLoads those read from disk rather than the CPU cache.
	LoRALoads     int64 `json:"lora_loads,omitempty"`
	LoRADiskLoads int64 `json:"lora_disk_loads,omitempty"`
}

// Engine is one simulated engine core (one data-parallel rank): the V1
// scheduler over a KV block pool and the step-time model. It has no clock:
// Step schedules one step, applies its effects and returns its duration;
// a driver (virtual or real clock) makes the outputs visible at the end of
// that duration. An Engine is not safe for concurrent use.
type Engine struct {
	model spaces.Model
	args  EngineArgs
	calib Calib
	gpu   spaces.GPU
	plan  MemoryPlan
	pool  *blockPool

	running  []*Request
	waiting  []*Request
	incoming []*Request // added while a step was in flight (async scheduling)
	sched    []*Request
	outs     []Output

	noise      bool
	slowdown   float64        // multiplies every step time (1 = calibrated speed)
	speed      func() float64 // the host's speed now (Host.Speed); nil = 1
	rng        *rand.Rand
	nextUID    uint64
	lastTokens int // tokens of the last step

	// Step-time constants, precomputed.
	gemmFlopsPerToken float64 // 2 x params / TP
	attnFlopsUnit     float64 // 4 x layers x hidden / TP
	peakFlops         float64 // attention
	gemmPeakFlops     float64 // GEMMs in the weight format
	weightBytes       float64 // per GPU
	sharedWeightBytes float64 // of which every step reads all
	expertWeightBytes float64 // of which routed experts (MoE)
	a2aBytesPerToken  float64 // expert-parallel dispatch + combine, per token and layer
	memBW             float64 // bytes/s after efficiency
	kvBytes           float64 // per token per GPU
	kvPenalty         float64 // kernel efficiency of the block size
	tpBytesPerToken   float64 // all-reduce payload per token and layer
	linkBW            float64
	launchS           float64 // per-step launch overhead without graphs
	piecewiseS        float64
	lora              *loraState // nil without --enable-lora

	Stats Stats
}

// EngineOption configures an Engine.
type EngineOption func(*Engine)

// WithNoise switches the seeded step noise on.
func WithNoise(seed uint64) EngineOption {
	return func(e *Engine) {
		e.noise = true
		e.rng = rand.New(rand.NewPCG(seed, 0x5eed_5173))
	}
}

// WithSlowdown multiplies every step's time by f (f > 0; e.g. 1.05 for a
// uniformly 5% slower engine), for measuring a regression gate: the
// simulated clock, the metrics and the client's figures all see it.
func WithSlowdown(f float64) EngineOption {
	return func(e *Engine) {
		if f > 0 {
			e.slowdown = f
		}
	}
}

// WithSpeed divides every step's time by speed() read at the step: the
// host's drifting speed on the real clock (nil: none).
func WithSpeed(speed func() float64) EngineOption {
	return func(e *Engine) { e.speed = speed }
}

// NewEngine builds an engine core from a successful memory plan.
func NewEngine(t spaces.Target, a EngineArgs, c Calib, plan MemoryPlan, opts ...EngineOption) *Engine {
	m, g := t.Model, t.GPU
	tp := float64(a.TensorParallelSize)
	e := &Engine{model: m, args: a, calib: c, gpu: g, plan: plan, slowdown: 1,
		pool: newBlockPool(plan.NumBlocks, a.EnablePrefixCaching)}
	e.memBW = g.BandwidthGBs * 1e9 * c.MemEff
	for _, o := range opts {
		o(e)
	}
	e.gemmFlopsPerToken = 2 * m.ActiveParams() * 1e9 / tp // a MoE token goes through its routed experts only
	e.attnFlopsUnit = 4 * float64(m.Layers) * float64(m.Hidden) / tp
	dtype := a.dtypeBytes(m)
	e.peakFlops = g.BF16TFLOPS * 1e12 * c.MFU
	e.gemmPeakFlops = e.peakFlops * quantFlopsScale(a.quantMethod(m), dtype, g)
	if dtype >= 4 {
		e.peakFlops = e.gemmPeakFlops // attention too runs without tensor cores
	}
	e.weightBytes = weightsPerGPU(m, a)
	e.sharedWeightBytes, e.expertWeightBytes = m.SplitExperts(e.weightBytes)
	if a.EnableExpertParallel && m.Experts > 0 {
		// Each token's hidden state goes to its k experts' GPUs and back.
		e.a2aBytesPerToken = 2 * m.DispatchBytes(a.TensorParallelSize*a.DataParallelSize, dtype)
		e.linkBW = math.Max(1, g.InterconnectGBs) * 1e9 * c.LinkEff
	}
	if a.EnableLoRA {
		e.lora = newLoRAState(m, a)
	}
	e.kvBytes = plan.KVBytesPerToken
	if e.kvBytes == 0 {
		e.kvBytes = kvBytesPerTokenGPU(m, a)
	}
	e.kvPenalty = 1 + 0.8/float64(a.BlockSize)
	if a.TensorParallelSize > 1 {
		e.tpBytesPerToken = (tp - 1) / tp * 2 * float64(m.Hidden) * dtype
		e.linkBW = math.Max(1, g.InterconnectGBs) * 1e9 * c.LinkEff
	}
	e.launchS = float64(m.Layers) * c.EagerPerLayerS
	e.piecewiseS = e.launchS * c.PiecewiseFrac
	return e
}

// Plan returns the memory plan the engine was built from.
func (e *Engine) Plan() MemoryPlan { return e.plan }

// Args returns the engine arguments.
func (e *Engine) Args() EngineArgs { return e.args }

// Add queues a request.
func (e *Engine) Add(r *Request) {
	e.nextUID++
	r.uid = e.nextUID
	r.seq = e.nextUID
	r.state = stateWaiting
	e.incoming = append(e.incoming, r)
	e.Stats.MaxWaiting = max(e.Stats.MaxWaiting, len(e.waiting)+len(e.incoming))
}

// admitIncoming moves newly added requests into WAITING.
func (e *Engine) admitIncoming() {
	for i, r := range e.incoming {
		e.enqueue(r, false)
		e.incoming[i] = nil
	}
	e.incoming = e.incoming[:0]
}

// enqueue puts r into WAITING: FCFS appends new requests and puts preempted
// ones at the front; the priority policy keeps (priority, arrival) order.
func (e *Engine) enqueue(r *Request, front bool) {
	if e.args.SchedulingPolicy == "priority" {
		i := sort.Search(len(e.waiting), func(i int) bool { return lessPrio(r, e.waiting[i]) })
		e.waiting = append(e.waiting, nil)
		copy(e.waiting[i+1:], e.waiting[i:])
		e.waiting[i] = r
		return
	}
	if front {
		e.waiting = append(e.waiting, nil)
		copy(e.waiting[1:], e.waiting)
		e.waiting[0] = r
		return
	}
	e.waiting = append(e.waiting, r)
}

func lessPrio(a, b *Request) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.seq < b.seq
}

// Abort removes a request (client disconnect) and frees its blocks.
func (e *Engine) Abort(r *Request) {
	switch r.state {
	case stateRunning:
		e.running = removeReq(e.running, r)
		e.freeBlocks(r)
		e.loraStop(r)
	case stateWaiting:
		e.waiting = removeReq(e.waiting, r)
		e.incoming = removeReq(e.incoming, r)
		e.freeBlocks(r)
	}
	r.state = stateDone
}

func removeReq(list []*Request, r *Request) []*Request {
	for i, x := range list {
		if x == r {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}

// HasWork reports whether any request is running or waiting.
func (e *Engine) HasWork() bool { return len(e.running)+len(e.waiting)+len(e.incoming) > 0 }

// Running and Waiting are the sizes of the two queues.
func (e *Engine) Running() int { return len(e.running) }
func (e *Engine) Waiting() int { return len(e.waiting) + len(e.incoming) }

// KVUsage is the fraction of KV blocks in use.
func (e *Engine) KVUsage() float64 { return e.pool.used() }

func (e *Engine) freeBlocks(r *Request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		e.pool.release(r.blocks[i])
	}
	r.blocks = r.blocks[:0]
	r.hashed = 0
}

// grow gives r blocks for its first `upto` tokens; false when the pool has
// too few free blocks.
func (e *Engine) grow(r *Request, upto int) bool {
	need := ceilDiv(upto, e.args.BlockSize) - len(r.blocks)
	if need <= 0 {
		return true
	}
	if need > e.pool.free {
		return false
	}
	for ; need > 0; need-- {
		r.blocks = append(r.blocks, e.pool.alloc())
	}
	return true
}

// loraStop releases r's hold on its adapter's slot.
func (e *Engine) loraStop(r *Request) {
	if e.lora != nil {
		e.lora.stop(r.Adapter)
	}
}

// victim is the index in RUNNING of the request to preempt: the last one
// (FCFS) or the lowest-priority, latest-arrived one (priority policy).
func (e *Engine) victim() int {
	if e.args.SchedulingPolicy != "priority" {
		return len(e.running) - 1
	}
	v := 0
	for i, r := range e.running {
		if lessPrio(e.running[v], r) {
			v = i
		}
	}
	return v
}

// preempt frees a running request's blocks and sends it back to WAITING to
// be recomputed (V1 always recomputes). It returns the budget the request
// had been given in this step, if any.
func (e *Engine) preempt(i int) int {
	r := e.running[i]
	copy(e.running[i:], e.running[i+1:])
	e.running[len(e.running)-1] = nil
	e.running = e.running[:len(e.running)-1]
	back := 0
	if r.schedN > 0 {
		back = r.schedN
		r.schedN = 0
		e.sched = removeReq(e.sched, r)
	}
	e.freeBlocks(r)
	e.loraStop(r)
	r.computed = 0
	r.Preemptions++
	r.state = stateWaiting
	e.Stats.Preemptions++
	e.enqueue(r, true)
	return back
}

// prefixHits counts the leading full prompt blocks already in the cache
// (at least the last prompt token is always recomputed) and how many of
// them sit on the free list.
func (e *Engine) prefixHits(r *Request) (hits, onFree int) {
	if !e.args.EnablePrefixCaching {
		return 0, 0
	}
	bs := e.args.BlockSize
	limit := (r.tokens() - 1) / bs
	for i := 0; i < limit; i++ {
		b := e.pool.lookup(r.blockKey(i, bs))
		if b < 0 {
			break
		}
		hits++
		if e.pool.ref[b] == 0 {
			onFree++
		}
	}
	return hits, onFree
}

// Step runs the scheduler for one engine step (reference §2.7), applies the
// step's effects and returns its duration in seconds and the outputs it
// produced (valid until the next Step). A zero duration means nothing could
// be scheduled.
func (e *Engine) Step() (float64, []Output) {
	e.outs = e.outs[:0]
	e.sched = e.sched[:0]
	a := &e.args
	// Requests added since the last step join WAITING now; with async
	// scheduling the next step was already scheduled while the previous one
	// ran, so they wait one step more (unless the engine was idle).
	async := a.AsyncScheduling && len(e.running)+len(e.waiting) > 0
	if !async {
		e.admitIncoming()
	}
	defer func() {
		if async {
			e.admitIncoming()
		}
	}()
	bs := a.BlockSize
	budget := a.MaxNumBatchedTokens
	preempted := false

	// 1. RUNNING requests first (decodes and unfinished chunked prefills).
	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n := r.tokens() - r.computed
		if a.LongPrefillTokenThreshold > 0 && n > a.LongPrefillTokenThreshold {
			n = a.LongPrefillTokenThreshold
		}
		n = min(n, budget, a.MaxModelLen-r.computed)
		if n <= 0 {
			i++
			continue
		}
		scheduled := true
		for !e.grow(r, r.computed+n) {
			j := e.victim()
			v := e.running[j]
			budget += e.preempt(j)
			preempted = true
			if j < i {
				i--
			}
			if v == r {
				scheduled = false
				break
			}
		}
		if !scheduled {
			continue
		}
		r.schedN = n
		e.sched = append(e.sched, r)
		budget -= n
		i++
	}

	// 2. WAITING requests, only if nothing was preempted in this step.
	if !preempted {
		for w := 0; w < len(e.waiting) && budget > 0 && len(e.running) < a.MaxNumSeqs; {
			r := e.waiting[w]
			if e.lora != nil && !e.lora.admissible(r.Adapter) {
				w++ // its adapter would be one too many in the batch: skipped, not blocking
				continue
			}
			hits, onFree := 0, 0
			if r.computed == 0 {
				hits, onFree = e.prefixHits(r)
			}
			hitTokens := hits * bs
			n := r.tokens() - hitTokens
			if a.LongPrefillTokenThreshold > 0 && n > a.LongPrefillTokenThreshold {
				n = a.LongPrefillTokenThreshold
			}
			if !a.EnableChunkedPrefill && n > budget {
				break
			}
			n = min(n, budget)
			need := ceilDiv(hitTokens+n, bs) - hits
			if need > e.pool.free-onFree {
				break // head-of-line: the first request that does not fit stops admission
			}
			for k := 0; k < hits; k++ {
				b := e.pool.lookup(r.blockKey(k, bs))
				e.pool.touch(b)
				r.blocks = append(r.blocks, b)
			}
			r.hashed = hits
			r.computed = hitTokens
			e.grow(r, hitTokens+n)
			if e.args.EnablePrefixCaching {
				e.Stats.PrefixQueries += int64(r.tokens())
				e.Stats.PrefixHits += int64(hitTokens)
			}
			if !r.admitted {
				r.admitted = true
				r.CachedTokens = hitTokens
			}
			copy(e.waiting[w:], e.waiting[w+1:])
			e.waiting[len(e.waiting)-1] = nil
			e.waiting = e.waiting[:len(e.waiting)-1]
			r.state = stateRunning
			e.running = append(e.running, r)
			if e.lora != nil {
				e.lora.start(r.Adapter, &e.Stats)
			}
			r.schedN = n
			e.sched = append(e.sched, r)
			budget -= n
		}
	}
	if len(e.sched) == 0 {
		return 0, e.outs
	}

	// 3. Step time, then the step's effects.
	var tokens, seqs int
	var kvRead, attnFlops float64
	for _, r := range e.sched {
		n, p := float64(r.schedN), float64(r.computed)
		tokens += r.schedN
		seqs++
		kvRead += p + n
		attnFlops += n * (p + n/2)
	}
	adapters := 0
	if e.lora != nil {
		adapters = len(e.lora.active)
	}
	dur := e.stepTime(tokens, seqs, kvRead, attnFlops, adapters)
	e.lastTokens = tokens

	finished := 0
	for _, r := range e.sched {
		n := r.schedN
		r.schedN = 0
		if r.computed < r.PromptLen {
			e.Stats.PromptTokens += int64(min(n, r.PromptLen-r.computed))
		}
		r.computed += n
		if e.args.EnablePrefixCaching {
			for full := r.computed / bs; r.hashed < full && r.hashed < len(r.blocks); r.hashed++ {
				e.pool.register(r.blocks[r.hashed], r.blockKey(r.hashed, bs))
			}
		}
		if r.computed < r.tokens() {
			continue // chunked prefill in progress
		}
		r.Generated++
		r.pending++
		e.Stats.GenTokens++
		done := r.Generated >= r.OutputLen
		if done || r.Generated == 1 || r.pending >= a.NumSchedulerSteps {
			e.outs = append(e.outs, Output{Req: r, Tokens: r.pending, First: r.Generated == r.pending, Finished: done})
			r.pending = 0
		}
		if done {
			r.state = stateDone
			e.freeBlocks(r)
			e.loraStop(r)
			finished++
		}
	}
	if finished > 0 {
		k := 0
		for _, r := range e.running {
			if r.state != stateDone {
				e.running[k] = r
				k++
			}
		}
		for i := k; i < len(e.running); i++ {
			e.running[i] = nil
		}
		e.running = e.running[:k]
	}
	e.Stats.Steps++
	e.Stats.BusyS += dur
	e.Stats.MaxRunning = max(e.Stats.MaxRunning, len(e.running)+finished)
	e.Stats.MaxWaiting = max(e.Stats.MaxWaiting, len(e.waiting)+len(e.incoming))
	if u := e.pool.used(); u > e.Stats.MaxKVUsage {
		e.Stats.MaxKVUsage = u
	}
	return dur, e.outs
}

// stepTime is the roofline step model of reference §5.2: fixed cost +
// max(compute, memory) of the GEMMs + max(compute, memory) of attention + TP
// all-reduces + launch overhead without CUDA
// graphs, plus CPU scheduling time (overlapped with async scheduling),
// times the seeded noise.
func (e *Engine) stepTime(tokens, seqs int, kvRead, attnFlops float64, adapters int) float64 {
	c := &e.calib
	n := float64(tokens)
	mfu := n / (n + c.MFUHalfTokens)
	// GEMMs read the weights once per step and are compute-bound from a few
	// hundred tokens on; attention reads the KV cache of every scheduled
	// token (decode) or is compute-bound (long prefill chunks). The two run
	// as separate kernels, so their times add.
	// A MoE step reads only the experts its tokens were routed to.
	weights := e.sharedWeightBytes + e.expertWeightBytes*expertReadShare(e.model, n)
	gemm := math.Max(weights/e.memBW, e.gemmFlopsPerToken*n/(e.gemmPeakFlops*mfu))
	attn := math.Max(e.kvBytes*kvRead*e.kvPenalty/e.memBW, e.attnFlopsUnit*attnFlops/e.peakFlops)
	gpu := c.StepFixedS + gemm + attn
	if e.tpBytesPerToken > 0 {
		gpu += 2 * float64(e.model.Layers) * (e.tpBytesPerToken*n/e.linkBW + c.AllReduceLatencyS)
	}
	if e.a2aBytesPerToken > 0 {
		gpu += 2 * float64(e.model.Layers) * (e.a2aBytesPerToken*n/e.linkBW + c.AllReduceLatencyS)
	}
	if e.lora != nil {
		gpu += e.lora.stepTime(e, n, adapters)
	}
	switch {
	case e.args.EnforceEager:
		gpu += e.launchS
	case tokens > e.plan.MaxCaptureSize:
		gpu += e.piecewiseS
	}
	cpu := (c.SchedFixedS + c.SchedPerSeqS*float64(seqs)) / float64(e.args.NumSchedulerSteps)
	var d float64
	if e.args.AsyncScheduling {
		d = math.Max(gpu, cpu) + c.AsyncSyncS
	} else {
		d = gpu + cpu
	}
	d *= e.slowdown
	if e.speed != nil {
		d /= e.speed()
	}
	if e.noise {
		d *= math.Exp(c.Noise * e.rng.NormFloat64())
		if e.rng.Float64() < c.JitterProb {
			d *= 1 + e.rng.Float64()*(c.JitterMax-1)
		}
	}
	return d
}

// ResetPrefixCache drops the hashes of all free blocks (POST /reset_prefix_cache).
func (e *Engine) ResetPrefixCache() {
	for b := e.pool.head; b >= 0; b = e.pool.next[b] {
		if k := e.pool.key[b]; k != 0 {
			delete(e.pool.cache, k)
			e.pool.key[b] = 0
		}
	}
}
