package spaces

import "fmt"

// Layout is a config's parallel layout: TP GPUs share each layer
// (tensor_parallel_size) in each of DP engine replicas (data_parallel_size).
type Layout struct{ TP, DP int }

// LayoutOf returns c's layout (1 for a size c does not set).
func LayoutOf(c Config) Layout {
	l := Layout{TP: 1, DP: 1}
	if c.Has("tensor_parallel_size") {
		l.TP = max(1, c.Int("tensor_parallel_size"))
	}
	if c.Has("data_parallel_size") {
		l.DP = max(1, c.Int("data_parallel_size"))
	}
	return l
}

// GPUs is the number of GPUs the layout occupies.
func (l Layout) GPUs() int { return l.TP * l.DP }

func (l Layout) String() string { return fmt.Sprintf("%dx%d", l.TP, l.DP) }

// Resplits returns c moved to every other parallel layout the space
// accepts, its other flags kept: each pair of tensor_parallel_size and
// data_parallel_size levels (the value c has for a size the space does not
// tune), normalised, in ascending (TP, DP) order; none when the space
// admits no other layout for c (one GPU: 1 x 1 whatever the other flags).
// Changing either size alone cannot re-split the GPUs: from TP 8 x DP 1 on
// 8 GPUs it gives 4 x 1 (half of them idle) or 8 x 2 (invalid), so a search
// that moves one coordinate at a time never reaches 4 x 2 from 8 x 1.
func (s *Space) Resplits(c Config) []Config {
	levels := func(name string) []Value {
		if p, ok := s.Param(name); ok && p.Tune && p.Fixed == nil {
			return p.Discrete()
		}
		if v, ok := c.Get(name); ok {
			return []Value{v}
		}
		return []Value{IntValue(1)}
	}
	cur := LayoutOf(c)
	var out []Config
	for _, tv := range levels("tensor_parallel_size") {
		for _, dv := range levels("data_parallel_size") {
			if (Layout{TP: tv.Int(), DP: dv.Int()}) == cur {
				continue
			}
			n, err := s.Normalize(c.With("tensor_parallel_size", tv).With("data_parallel_size", dv))
			if err == nil && s.Validate(n) == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
