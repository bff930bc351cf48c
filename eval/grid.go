package eval

import (
	"math"
	"sort"

	"github.com/vllm-tuner/tuner/spaces"
)

// Grid levels of the auto_tune-style baseline (vLLM's
// benchmarks/auto_tune/auto_tune.sh sweeps NUM_SEQS_LIST x
// NUM_BATCHED_TOKENS_LIST; these lists extend its defaults "128 256" and
// "512 1024 2048 4096" to cover the space).
var (
	gridSeqs   = []int{32, 64, 128, 256, 512, 1024}
	gridTokens = []int{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}
)

// coarseToFine orders the indexes 0..n-1 so that every prefix spreads over
// the range: both ends, the middle, then the quarter points and so on.
func coarseToFine(n int) []int {
	if n <= 0 {
		return nil
	}
	order := []int{}
	used := make([]bool, n)
	push := func(i int) {
		if i >= 0 && i < n && !used[i] {
			used[i] = true
			order = append(order, i)
		}
	}
	push(0)
	push(n - 1)
	for den := 2; len(order) < n; den *= 2 {
		for num := 1; num < den; num += 2 {
			push(int(math.Round(float64(num) / float64(den) * float64(n-1))))
		}
		if den > 4*n {
			for i := range n {
				push(i)
			}
		}
	}
	return order
}

// gridConfigs is the max-num-seqs x max-num-batched-tokens grid on top of
// base, valid points only, ordered coarse to fine: point (i, j) comes
// before (k, l) when its larger refinement rank is smaller, so each prefix
// is a near-square sub-grid spread over both ranges.
func gridConfigs(p *Problem, base spaces.Config) []spaces.Config {
	rs, rt := ranks(len(gridSeqs)), ranks(len(gridTokens))
	type pt struct{ i, j int }
	var pts []pt
	for i := range gridSeqs {
		for j := range gridTokens {
			pts = append(pts, pt{i, j})
		}
	}
	sort.SliceStable(pts, func(a, b int) bool {
		pa, pb := pts[a], pts[b]
		ma, mb := max(rs[pa.i], rt[pa.j]), max(rs[pb.i], rt[pb.j])
		if ma != mb {
			return ma < mb
		}
		if sa, sb := rs[pa.i]+rt[pa.j], rs[pb.i]+rt[pb.j]; sa != sb {
			return sa < sb
		}
		if pa.i != pb.i {
			return pa.i < pb.i
		}
		return pa.j < pb.j
	})
	var out []spaces.Config
	for _, q := range pts {
		c := base.With("max_num_seqs", spaces.IntValue(gridSeqs[q.i])).
			With("max_num_batched_tokens", spaces.IntValue(gridTokens[q.j]))
		if c, ok := validConfig(p.Space, c); ok {
			out = append(out, c)
		}
	}
	return out
}

// ranks[i] is the position of index i in the coarse-to-fine order.
func ranks(n int) []int {
	r := make([]int, n)
	for pos, i := range coarseToFine(n) {
		r[i] = pos
	}
	return r
}
