package bench

import (
	"slices"
	"testing"
)

func TestCoarseToFine(t *testing.T) {
	for n := 1; n <= 40; n++ {
		o := coarseToFine(n)
		s := slices.Clone(o)
		slices.Sort(s)
		for i := range n {
			if s[i] != i {
				t.Fatalf("n=%d: order %v is not a permutation", n, o)
			}
		}
		if n >= 2 && (o[0] != 0 || o[1] != n-1) {
			t.Fatalf("n=%d: order %v does not start with both ends", n, o)
		}
	}
	if got := coarseToFine(5); !slices.Equal(got, []int{0, 4, 2, 1, 3}) {
		t.Fatalf("coarseToFine(5) = %v", got)
	}
}
