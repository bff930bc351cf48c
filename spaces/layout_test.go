package spaces

import (
	"slices"
	"testing"
)

// TestResplits: a config moves to every other TP x DP split the space
// accepts (other flags kept), never past the GPUs present or to a size
// that does not divide the heads; one GPU has no other layout.
func TestResplits(t *testing.T) {
	for _, tc := range []struct {
		model string
		gpus  int
		from  Layout
		ep    bool     // enable_expert_parallel: needs more than one GPU
		want  []string // layouts, ascending (TP, DP)
	}{
		{"Llama-3.1-8B", 1, Layout{1, 1}, false, nil},
		{"Llama-3.1-8B", 2, Layout{1, 1}, false, []string{"1x2", "2x1"}},
		{"Qwen2-72B", 8, Layout{8, 1}, false, []string{"1x1", "1x2", "1x4", "1x8", "2x1", "2x2", "2x4", "4x1", "4x2"}},
		{"Qwen2-72B", 8, Layout{4, 2}, false, []string{"1x1", "1x2", "1x4", "1x8", "2x1", "2x2", "2x4", "4x1", "8x1"}},
		{"Llama-3.1-70B", 4, Layout{4, 1}, false, []string{"1x1", "1x2", "1x4", "2x1", "2x2"}},
		{"Mixtral-8x7B", 2, Layout{2, 1}, true, []string{"1x2"}},
		{"Mixtral-8x7B", 2, Layout{2, 1}, false, []string{"1x1", "1x2"}},
	} {
		tg, err := DefaultCatalog().Target(tc.model, "H100-80GB", tc.gpus)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := ResolveDefault(tg)
		if err != nil {
			t.Fatal(err)
		}
		c := sp.DefaultConfig().With("tensor_parallel_size", IntValue(tc.from.TP)).With("data_parallel_size", IntValue(tc.from.DP)).
			With("max_num_seqs", IntValue(77))
		if tc.ep {
			c = c.With("enable_expert_parallel", BoolValue(true))
		}
		var got []string
		for _, n := range sp.Resplits(c) {
			got = append(got, LayoutOf(n).String())
			if err := sp.Validate(n); err != nil {
				t.Errorf("%s on %d: %s invalid: %v", tc.model, tc.gpus, LayoutOf(n), err)
			}
			if !n.Without("tensor_parallel_size").Without("data_parallel_size").Equal(c.Without("tensor_parallel_size").Without("data_parallel_size")) {
				t.Errorf("%s on %d: %s changed another flag", tc.model, tc.gpus, LayoutOf(n))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s on %d GPUs from %s: %v, want %v", tc.model, tc.gpus, tc.from, got, tc.want)
		}
	}
}
