package spaces

import "testing"

func TestCaptureSizes(t *testing.T) {
	for _, tc := range []struct{ seqs, n, largest int }{
		{256, 67, 512}, // the reference's 0.10.x log: 67 sizes up to 512
		{1024, 67, 512},
		{4, 4, 8}, // 1, 2, 4, 8
		{1, 2, 2}, // 1, 2
		{20, 8, 40},
	} {
		if n, largest := CaptureSizes(tc.seqs); n != tc.n || largest != tc.largest {
			t.Errorf("max_num_seqs %d: %d sizes up to %d, want %d up to %d", tc.seqs, n, largest, tc.n, tc.largest)
		}
	}
}

func TestGraphInBudget(t *testing.T) {
	for v, want := range map[string]bool{"0.11.0": false, "0.20.9": false, "0.21": true, "0.21.0rc1": true, "1.0": true, "nope": false} {
		if got := GraphInBudget(v); got != want {
			t.Errorf("GraphInBudget(%q) = %v, want %v", v, got, want)
		}
	}
}
