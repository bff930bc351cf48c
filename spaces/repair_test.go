package spaces

import (
	"slices"
	"strings"
	"testing"
)

// TestRepairs: a config that breaks a constraint is moved, one other
// parameter the constraint reads at a time, to the nearest config the space
// admits; parameters named in keep stay; valid or out-of-range configs get
// no repair.
func TestRepairs(t *testing.T) {
	tg, err := DefaultCatalog().Target("Llama-3.1-8B", "H100-80GB", 1)
	if err != nil {
		t.Fatal(err)
	}
	tg.MaxModelLen = 8192
	sp, err := ResolveDefault(tg)
	if err != nil {
		t.Fatal(err)
	}
	base := sp.DefaultConfig().With("enable_chunked_prefill", BoolValue(true))
	for _, tc := range []struct {
		name string
		set  map[string]Value
		keep []string
		want []string // the repaired configs' changed flags, name=value, in order
	}{
		{"budget below seqs, budget kept", map[string]Value{"max_num_seqs": IntValue(800), "max_num_batched_tokens": IntValue(700)},
			[]string{"max_num_batched_tokens"}, []string{"max_num_seqs=700"}},
		{"budget below seqs", map[string]Value{"max_num_seqs": IntValue(800), "max_num_batched_tokens": IntValue(700)},
			nil, []string{"max_num_batched_tokens=800", "max_num_seqs=700"}},
		{"chunked prefill off below the window, flag kept", map[string]Value{"enable_chunked_prefill": BoolValue(false), "max_num_batched_tokens": IntValue(2048)},
			[]string{"enable_chunked_prefill"}, []string{"max_num_batched_tokens=8192"}},
		{"chunked prefill off below the window, budget kept", map[string]Value{"enable_chunked_prefill": BoolValue(false), "max_num_batched_tokens": IntValue(2048)},
			[]string{"max_num_batched_tokens"}, []string{"enable_chunked_prefill=true"}},
		{"valid", map[string]Value{"max_num_seqs": IntValue(100), "max_num_batched_tokens": IntValue(700)}, nil, nil},
		{"out of range", map[string]Value{"max_num_seqs": IntValue(1 << 20), "max_num_batched_tokens": IntValue(700)}, nil, nil},
	} {
		c := base
		for n, v := range tc.set {
			c = c.With(n, v)
		}
		var got []string
		for _, r := range sp.Repairs(c, tc.keep...) {
			if err := sp.Validate(r); err != nil {
				t.Errorf("%s: repair %v invalid: %v", tc.name, r, err)
			}
			var diff []string
			for _, n := range r.Names() {
				a, _ := r.Get(n)
				if b, _ := c.Get(n); !a.Equal(b) {
					diff = append(diff, n+"="+a.String())
				}
			}
			got = append(got, strings.Join(diff, ","))
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: repairs %v, want %v", tc.name, got, tc.want)
		}
	}
}
