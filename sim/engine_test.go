package sim

import (
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

func newTestEngine(t *testing.T, kv ...any) *Engine {
	t.Helper()
	return startEngine(t, h100(t, 1), nil, kv...)
}

// startEngine starts vLLM's default config on tg (with the overrides kv)
// and returns its engine, built with opts.
func startEngine(t *testing.T, tg spaces.Target, opts []EngineOption, kv ...any) *Engine {
	t.Helper()
	a, plan, se := newRunner(t, tg).Start(defaults(t, tg, kv...))
	if se != nil {
		t.Fatal(se)
	}
	return NewEngine(tg, a, CalibFor(tg.GPU), plan, opts...)
}

// drive steps e until idle and returns each request's first-token time.
func drive(t *testing.T, e *Engine, reqs []*Request) []float64 {
	t.Helper()
	first := make([]float64, len(reqs))
	var now float64
	for steps := 0; e.HasWork(); steps++ {
		d, outs := e.Step()
		if d <= 0 || steps > 1e6 {
			t.Fatalf("stalled after %d steps", steps)
		}
		now += d
		for _, o := range outs {
			if o.First {
				first[o.Req.ID] = now
			}
		}
	}
	return first
}

// With request priorities, the priority policy serves urgent requests first;
// FCFS ignores priorities (vLLM rejects them, the engine just orders by
// arrival).
func TestSchedulingPolicy(t *testing.T) {
	mean := func(policy string) (urgent, rest float64) {
		e := newTestEngine(t, "scheduling_policy", policy, "max_num_seqs", 16, "max_num_batched_tokens", 2048)
		var reqs []*Request
		for i := 0; i < 64; i++ {
			r := &Request{ID: i, PromptLen: 1024, OutputLen: 64, Priority: 1}
			if i%4 == 3 {
				r.Priority = 0
			}
			reqs = append(reqs, r)
			e.Add(r)
		}
		first := drive(t, e, reqs)
		var nu, nr int
		for i, r := range reqs {
			if r.Priority == 0 {
				urgent += first[i]
				nu++
			} else {
				rest += first[i]
				nr++
			}
		}
		return urgent / float64(nu), rest / float64(nr)
	}
	fu, fr := mean("fcfs")
	pu, pr := mean("priority")
	t.Logf("mean TTFT s: fcfs urgent %.3f other %.3f; priority urgent %.3f other %.3f", fu, fr, pu, pr)
	if pu >= fu/2 || pu >= pr {
		t.Errorf("priority policy should serve priority-0 requests first: %.3f vs fcfs %.3f", pu, fu)
	}
}

// Preemption recomputes: a request preempted once needs its prompt and the
// tokens generated so far prefilled again, and still finishes with exactly
// OutputLen tokens.
func TestPreemptionRecompute(t *testing.T) {
	e := newTestEngine(t)
	e.pool = newBlockPool(ceilDiv(8192, 16)+64, true) // a tiny pool
	var reqs []*Request
	for i := 0; i < 24; i++ {
		r := &Request{ID: i, PromptLen: 700, OutputLen: 400}
		reqs = append(reqs, r)
		e.Add(r)
	}
	var streamed = make([]int, len(reqs))
	for steps := 0; e.HasWork(); steps++ {
		d, outs := e.Step()
		if d <= 0 || steps > 1e6 {
			t.Fatal("stalled")
		}
		for _, o := range outs {
			streamed[o.Req.ID] += o.Tokens
		}
		if e.pool.free < 0 || e.pool.free > e.pool.total() {
			t.Fatalf("free blocks %d out of range", e.pool.free)
		}
	}
	if e.Stats.Preemptions == 0 {
		t.Fatal("no preemption with a tiny pool")
	}
	for i, r := range reqs {
		if streamed[i] != r.OutputLen || !r.Done() {
			t.Errorf("request %d streamed %d tokens, want %d", i, streamed[i], r.OutputLen)
		}
	}
	if e.pool.free != e.pool.total() {
		t.Errorf("%d of %d blocks free after the run: leak", e.pool.free, e.pool.total())
	}
	if e.Stats.PromptTokens <= int64(24*700) {
		t.Errorf("prompt tokens computed %d: recompute should add to 24 x 700", e.Stats.PromptTokens)
	}
	t.Logf("%d preemptions, %d prefill tokens computed for %d prompt tokens", e.Stats.Preemptions, e.Stats.PromptTokens, 24*700)
}

// Prefix caching: full blocks of a shared prefix are computed once; at
// least the last prompt token is always recomputed.
func TestPrefixCacheHits(t *testing.T) {
	e := newTestEngine(t)
	a := &Request{ID: 0, PromptLen: 1000, OutputLen: 4, PrefixLen: 800}
	e.Add(a)
	drive(t, e, []*Request{a})
	b := &Request{ID: 0, PromptLen: 1000, OutputLen: 4, PrefixLen: 800}
	e.Add(b)
	drive(t, e, []*Request{b})
	if b.CachedTokens != 800 {
		t.Errorf("second request hit %d tokens, want 800 (50 full blocks of the prefix)", b.CachedTokens)
	}
	// A prompt that is entirely shared still recomputes its last block.
	c := &Request{ID: 0, PromptLen: 800, OutputLen: 4, PrefixLen: 800}
	e.Add(c)
	drive(t, e, []*Request{c})
	if c.CachedTokens != 784 {
		t.Errorf("fully shared prompt hit %d tokens, want 784", c.CachedTokens)
	}
	e.ResetPrefixCache()
	d := &Request{ID: 0, PromptLen: 1000, OutputLen: 4, PrefixLen: 800}
	e.Add(d)
	drive(t, e, []*Request{d})
	if d.CachedTokens != 0 {
		t.Errorf("after reset: %d cached tokens", d.CachedTokens)
	}
}

// Property: block accounting balances after random workloads with aborts.
func TestBlockAccountingProperty(t *testing.T) {
	for seed := 0; seed < 20; seed++ {
		e := newTestEngine(t, "block_size", []int{8, 16, 32, 64, 128}[seed%5])
		e.pool = newBlockPool(2000+seed*37, seed%2 == 0)
		var reqs []*Request
		for i := 0; i < 60; i++ {
			r := &Request{ID: i, PromptLen: 50 + (i*7919+seed*104729)%3000, OutputLen: 1 + (i*31+seed)%300, PrefixLen: 256}
			reqs = append(reqs, r)
			e.Add(r)
		}
		for steps := 0; e.HasWork(); steps++ {
			d, _ := e.Step()
			if d <= 0 || steps > 1e6 {
				t.Fatalf("seed %d: stalled", seed)
			}
			if steps == 40 {
				e.Abort(reqs[seed%60])
				e.Abort(reqs[(seed+17)%60])
			}
			held := 0
			for _, r := range e.running {
				held += len(r.blocks)
			}
			if used := e.pool.total() - e.pool.free; used > held {
				t.Fatalf("seed %d step %d: %d blocks used but running requests hold %d", seed, steps, used, held)
			}
			if len(e.running) > e.args.MaxNumSeqs {
				t.Fatalf("running %d > max_num_seqs", len(e.running))
			}
		}
		if e.pool.free != e.pool.total() {
			t.Errorf("seed %d: %d of %d blocks free at the end", seed, e.pool.free, e.pool.total())
		}
	}
}

// WithSlowdown scales every step, so a run takes exactly F times as long
// (noise off) with the same schedule, and noise on keeps the factor on
// average; --slowdown on vllm-sim is that option.
func TestSlowdownScalesEveryStep(t *testing.T) {
	run := func(opts ...EngineOption) (total float64, steps int) {
		e := startEngine(t, h100(t, 1), opts)
		for i := 0; i < 32; i++ {
			e.Add(&Request{ID: i, PromptLen: 512 + 16*i, OutputLen: 64})
		}
		for e.HasWork() {
			d, _ := e.Step()
			total += d
			steps++
		}
		return total, steps
	}
	base, n0 := run()
	for _, f := range []float64{1.05, 1.27} {
		slow, n1 := run(WithSlowdown(f))
		if n1 != n0 || math.Abs(slow/base-f) > 1e-9 {
			t.Errorf("slowdown %v: %d steps, %.6f x the time; want %d steps, %v x", f, n1, slow/base, n0, f)
		}
	}
	noisy, _ := run(WithNoise(1))
	noisySlow, _ := run(WithNoise(1), WithSlowdown(1.05))
	if math.Abs(noisySlow/noisy-1.05) > 1e-9 {
		t.Errorf("with noise: %.6f x, want 1.05 (same seed, same draws)", noisySlow/noisy)
	}
	o, err := ParseServeArgs([]string{"m", "--slowdown", "1.05"})
	if err != nil || o.Slowdown != 1.05 {
		t.Errorf("--slowdown: %v %v", o.Slowdown, err)
	}
	if _, err := ParseServeArgs([]string{"m", "--slowdown", "0"}); err == nil {
		t.Error("--slowdown 0 accepted")
	}
}
