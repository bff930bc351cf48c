package pareto

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var (
	dirs2 = []Direction{Maximize, Minimize}
	dirs3 = []Direction{Maximize, Minimize, Minimize}
)

func randPoints(r *rand.Rand, n, d int, integer bool) [][]float64 {
	pts := make([][]float64, n)
	for i := range pts {
		p := make([]float64, d)
		for j := range p {
			if integer {
				p[j] = float64(r.IntN(8))
			} else {
				p[j] = r.Float64() * 10
			}
		}
		pts[i] = p
	}
	return pts
}

func TestDominates(t *testing.T) {
	tests := []struct {
		name string
		a, b []float64
		want bool
	}{
		{"better in both", []float64{10, 1}, []float64{5, 2}, true},
		{"better in one equal other", []float64{10, 2}, []float64{5, 2}, true},
		{"equal", []float64{5, 2}, []float64{5, 2}, false},
		{"trade-off", []float64{10, 3}, []float64{5, 2}, false},
		{"worse", []float64{5, 2}, []float64{10, 1}, false},
		{"nan", []float64{math.NaN(), 1}, []float64{5, 2}, false},
		{"nan other side", []float64{10, 1}, []float64{math.NaN(), 2}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Dominates(tc.a, tc.b, dirs2); got != tc.want {
				t.Errorf("Dominates(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

// checkFront asserts the two defining properties of a front.
func checkFront(t *testing.T, pts [][]float64, dirs []Direction, keep []bool, front []int) {
	t.Helper()
	in := make(map[int]bool)
	for _, f := range front {
		in[f] = true
		if keep != nil && !keep[f] {
			t.Fatalf("masked point %d in front", f)
		}
	}
	for i, p := range pts {
		if keep != nil && !keep[i] {
			continue
		}
		if hasNaN(p) {
			if in[i] {
				t.Fatalf("NaN point %d in front", i)
			}
			continue
		}
		dominated := false
		for j, q := range pts {
			if keep != nil && !keep[j] {
				continue
			}
			if Dominates(q, p, dirs) {
				dominated = true
				if in[i] {
					t.Fatalf("front member %d %v dominated by %d %v", i, p, j, q)
				}
			}
		}
		if !dominated && !in[i] {
			t.Fatalf("non-dominated point %d %v missing from front %v", i, p, front)
		}
	}
}

func TestFrontProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		d := 2 + iter%3
		dirs := make([]Direction, d)
		for j := range dirs {
			dirs[j] = []Direction{Maximize, Minimize}[r.IntN(2)]
		}
		pts := randPoints(r, 1+r.IntN(60), d, iter%2 == 0) // integers give ties
		var keep []bool
		if iter%3 == 0 {
			keep = make([]bool, len(pts))
			for i := range keep {
				keep[i] = r.IntN(3) > 0
			}
		}
		checkFront(t, pts, dirs, keep, FrontMasked(pts, dirs, keep))
	}
}

func TestSortRanks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		pts := randPoints(r, 40, 3, true)
		pts = append(pts, []float64{math.NaN(), 1, 1})
		fronts := Sort(pts, dirs3)
		ranks := Ranks(pts, dirs3)
		if ranks[len(pts)-1] != -1 {
			t.Fatalf("NaN point has rank %d", ranks[len(pts)-1])
		}
		seen := 0
		for k, f := range fronts {
			seen += len(f)
			for _, i := range f {
				if ranks[i] != k {
					t.Fatalf("point %d in front %d has rank %d", i, k, ranks[i])
				}
				// Rank k > 0: dominated by some point of rank k-1, by none of rank >= k.
				for j := range pts {
					if ranks[j] >= k && Dominates(pts[j], pts[i], dirs3) {
						t.Fatalf("point %d (rank %d) dominated by %d (rank %d)", i, k, j, ranks[j])
					}
				}
				if k > 0 && !slices.ContainsFunc(fronts[k-1], func(j int) bool { return Dominates(pts[j], pts[i], dirs3) }) {
					t.Fatalf("point %d of rank %d not dominated by rank %d", i, k, k-1)
				}
			}
		}
		if seen != len(pts)-1 {
			t.Fatalf("fronts hold %d points, want %d", seen, len(pts)-1)
		}
	}
}

func TestInsertMatchesBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		pts := randPoints(r, 80, 3, true)
		var front [][]float64
		var ids []int
		for i, p := range pts {
			add, drop := Insert(front, p, dirs3)
			for k := len(drop) - 1; k >= 0; k-- {
				front = slices.Delete(front, drop[k], drop[k]+1)
				ids = slices.Delete(ids, drop[k], drop[k]+1)
			}
			if add {
				front = append(front, p)
				ids = append(ids, i)
			}
		}
		slices.Sort(ids)
		if want := Front(pts, dirs3); !slices.Equal(ids, want) {
			t.Fatalf("incremental front %v, batch %v", ids, want)
		}
	}
}

// hvInclusionExclusion is the exact brute force: the union of boxes [p, ref]
// (minimisation space) measured by inclusion-exclusion over all subsets.
func hvInclusionExclusion(pts [][]float64, dirs []Direction, ref []float64) float64 {
	var m [][]float64
	for _, p := range pts {
		q := make([]float64, len(dirs))
		ok := true
		for j, d := range dirs {
			q[j] = p[j] * d.sign()
			if !(q[j] < ref[j]*d.sign()) {
				ok = false
			}
		}
		if ok {
			m = append(m, q)
		}
	}
	total := 0.0
	for mask := 1; mask < 1<<len(m); mask++ {
		corner := make([]float64, len(dirs))
		for j := range corner {
			corner[j] = math.Inf(-1)
		}
		bits := 0
		for i := range m {
			if mask&(1<<i) != 0 {
				bits++
				for j := range corner {
					corner[j] = max(corner[j], m[i][j])
				}
			}
		}
		vol := 1.0
		for j, d := range dirs {
			vol *= ref[j]*d.sign() - corner[j]
		}
		if bits%2 == 1 {
			total += vol
		} else {
			total -= vol
		}
	}
	return total
}

// hvGrid counts the unit cells of [0,8)^d (integer points) dominated by some
// point and dominating ref; exact for integer coordinates.
func hvGrid(pts [][]float64, dirs []Direction, ref []float64) float64 {
	d := len(dirs)
	count := 0
	cell := make([]float64, d)
	var rec func(j int)
	rec = func(j int) {
		if j == d {
			// cell spans [cell, cell+1) in original units; its centre must be
			// beaten by ref and covered by some point's box.
			for k, dir := range dirs {
				c := (cell[k] + 0.5) * dir.sign()
				if !(c < ref[k]*dir.sign()) {
					return
				}
			}
			for _, p := range pts {
				in := true
				for k, dir := range dirs {
					if (cell[k]+0.5)*dir.sign() < p[k]*dir.sign() {
						in = false
						break
					}
				}
				if in {
					count++
					return
				}
			}
			return
		}
		for v := -1; v < 9; v++ {
			cell[j] = float64(v)
			rec(j + 1)
		}
	}
	rec(0)
	return float64(count)
}

const hvEps = 1e-9

func TestHypervolumeBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 400 {
		d := 2 + iter%2
		dirs := dirs2
		ref := []float64{0, 10}
		if d == 3 {
			dirs, ref = dirs3, []float64{0, 10, 10}
		}
		n := 1 + r.IntN(10)
		pts := randPoints(r, n, d, iter%4 < 2)
		got, err := Hypervolume(pts, dirs, ref)
		if err != nil {
			t.Fatal(err)
		}
		want := hvInclusionExclusion(pts, dirs, ref)
		if math.Abs(got-want) > hvEps*max(1, want) {
			t.Fatalf("d=%d points %v: hypervolume %v, inclusion-exclusion %v", d, pts, got, want)
		}
	}
}

// mixedDirs returns the first d of (minimise, maximise, minimise) and their
// reference point (8, 0, 8), inside randPoints' range so that some points
// do not beat it: the mixed-direction cases.
func mixedDirs(d int) ([]Direction, []float64) {
	return []Direction{Minimize, Maximize, Minimize}[:d], []float64{8, 0, 8}[:d]
}

func TestHypervolumeGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for iter := range 60 {
		d := 2 + iter%2
		dirs, ref := mixedDirs(d)
		pts := randPoints(r, 1+r.IntN(25), d, true)
		got, err := Hypervolume(pts, dirs, ref)
		if err != nil {
			t.Fatal(err)
		}
		if want := hvGrid(pts, dirs, ref); math.Abs(got-want) > hvEps {
			t.Fatalf("d=%d points %v: hypervolume %v, grid %v", d, pts, got, want)
		}
	}
}

func TestHypervolumeCases(t *testing.T) {
	tests := []struct {
		name string
		pts  [][]float64
		dirs []Direction
		ref  []float64
		want float64
	}{
		{"empty", nil, dirs2, []float64{0, 10}, 0},
		{"one point 2d", [][]float64{{4, 6}}, dirs2, []float64{0, 10}, 16},
		{"point at ref ignored", [][]float64{{0, 6}, {4, 10}}, dirs2, []float64{0, 10}, 0},
		{"staircase 2d", [][]float64{{1, 2}, {2, 1}}, []Direction{Maximize, Maximize}, []float64{0, 0}, 3},
		{"one point 3d", [][]float64{{2, 1, 1}}, dirs3, []float64{0, 3, 4}, 12},
		{"1d", [][]float64{{3}, {5}}, []Direction{Maximize}, []float64{1}, 4},
		{"nan skipped", [][]float64{{math.NaN(), 1}, {4, 6}}, dirs2, []float64{0, 10}, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Hypervolume(tc.pts, tc.dirs, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tc.want) > hvEps {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := Hypervolume([][]float64{{1, 2, 3, 4}}, make([]Direction, 4), make([]float64, 4)); err == nil {
		t.Error("4 objectives: want error")
	}
	if _, err := Hypervolume([][]float64{{1}}, dirs2, []float64{0, 10}); err == nil {
		t.Error("short point: want error")
	}
}

func TestContribution(t *testing.T) {
	// The gain of one point is the difference of the two volumes, whatever
	// the dimension, directions, ties and points outside ref.
	r := rand.New(rand.NewPCG(13, 14))
	for iter := range 600 {
		d := 1 + iter%3
		dirs, ref := mixedDirs(d)
		pts := randPoints(r, r.IntN(30), d, iter%4 < 2)
		p := randPoints(r, 1, d, iter%4 < 2)[0]
		if iter%7 == 0 && len(pts) > 0 {
			p = slices.Clone(pts[r.IntN(len(pts))]) // a tie: adds nothing
		}
		before, err := Hypervolume(pts, dirs, ref)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := Hypervolume(append(slices.Clone(pts), p), dirs, ref)
		got, err := Contribution(pts, p, dirs, ref)
		if err != nil {
			t.Fatal(err)
		}
		if want := after - before; math.Abs(got-want) > hvEps*max(1, after) {
			t.Fatalf("d=%d points %v, p %v: contribution %v, difference %v", d, pts, p, got, want)
		}
	}
	if _, err := Contribution([][]float64{{1, 2}}, []float64{1}, dirs2, []float64{0, 10}); err == nil {
		t.Error("short point: want error")
	}
	if _, err := Contribution([][]float64{{1}}, []float64{1, 2}, dirs2, []float64{0, 10}); err == nil {
		t.Error("short front point: want error")
	}
}

func TestHypervolumeFrontInvariant(t *testing.T) {
	// Dominated points never change the hypervolume.
	r := rand.New(rand.NewPCG(11, 12))
	for range 50 {
		pts := randPoints(r, 200, 3, false)
		ref := []float64{0, 10, 10}
		all, _ := Hypervolume(pts, dirs3, ref)
		var fp [][]float64
		for _, i := range Front(pts, dirs3) {
			fp = append(fp, pts[i])
		}
		front, _ := Hypervolume(fp, dirs3, ref)
		if math.Abs(all-front) > hvEps*max(1, all) {
			t.Fatalf("all %v != front %v", all, front)
		}
	}
}

func TestCrowdingAndSelect(t *testing.T) {
	pts := [][]float64{{1, 5}, {2, 4}, {3, 3}, {3.1, 2.9}, {5, 1}}
	cd := CrowdingDistance(pts, dirs2)
	if !math.IsInf(cd[0], 1) || !math.IsInf(cd[4], 1) {
		t.Fatalf("extremes not infinite: %v", cd)
	}
	if !(cd[2] < cd[1]) || math.Abs(cd[2]-0.55) > 1e-12 {
		t.Errorf("crowded point 2 (%v) should be 0.55, below point 1 (%v)", cd[2], cd[1])
	}
	got := SelectDiverse(pts, dirs2, 3)
	if len(got) != 3 || got[0] != 0 || got[2] != 4 {
		t.Errorf("SelectDiverse = %v, want extremes 0 and 4 kept", got)
	}
	if got := SelectDiverse(pts, dirs2, 10); len(got) != 5 {
		t.Errorf("k > n: %v", got)
	}
}

func TestKnee(t *testing.T) {
	// Throughput up, latency down: the elbow (9, 2) is closest to the ideal.
	pts := [][]float64{{1, 1}, {9, 2}, {10, 10}}
	if k := Knee(pts, dirs2, nil); k != 1 {
		t.Errorf("Knee = %d, want 1", k)
	}
	// Weighting latency heavily picks the low-latency extreme.
	if k := Knee(pts, dirs2, []float64{0.01, 1}); k != 0 {
		t.Errorf("weighted Knee = %d, want 0", k)
	}
	if k := Knee(nil, dirs2, nil); k != -1 {
		t.Errorf("empty Knee = %d", k)
	}
}

func TestParseObjectives(t *testing.T) {
	o, err := ParseObjectives("output_throughput:max, tpot_p99:minimise,peak_vram_gib:min")
	if err != nil {
		t.Fatal(err)
	}
	if o.String() != "output_throughput:max,tpot_p99:min,peak_vram_gib:min" {
		t.Errorf("round trip: %s", o)
	}
	for _, bad := range []string{"", "x", "x:up", "a:max,a:min", ":max"} {
		if _, err := ParseObjectives(bad); err == nil {
			t.Errorf("ParseObjectives(%q): want error", bad)
		}
	}
}

// FuzzFront decodes bytes into small 2-D/3-D point sets and checks the front
// properties and hypervolume against inclusion-exclusion.
func FuzzFront(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 0, 0, 0, 0, 255, 255, 7, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		d := 2 + int(data[0])%2
		data = data[1:]
		var pts [][]float64
		for len(data) >= d && len(pts) < 10 {
			p := make([]float64, d)
			for j := range p {
				p[j] = float64(data[j]) / 16
			}
			pts = append(pts, p)
			data = data[d:]
		}
		if len(data) >= 8 && len(pts) > 0 { // inject a special value
			pts[0][0] = math.Float64frombits(binary.LittleEndian.Uint64(data))
		}
		dirs, ref := dirs2, []float64{-1, 17}
		if d == 3 {
			dirs, ref = dirs3, []float64{-1, 17, 17}
		}
		checkFront(t, pts, dirs, nil, Front(pts, dirs))
		got, err := Hypervolume(pts, dirs, ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			if math.IsInf(p[0], 0) || math.Abs(p[0]) > 1e6 {
				return // brute force loses precision on huge volumes
			}
		}
		want := hvInclusionExclusion(pts, dirs, ref)
		if math.Abs(got-want) > 1e-6*max(1, want) {
			t.Fatalf("points %v: hypervolume %v, inclusion-exclusion %v", pts, got, want)
		}
	})
}

func benchPoints(n, d int) [][]float64 {
	r := rand.New(rand.NewPCG(42, 42))
	pts := randPoints(r, n, d, false)
	// Put many points near a trade-off surface so fronts are not tiny.
	for _, p := range pts {
		s := 0.0
		for _, x := range p[1:] {
			s += x
		}
		p[0] = s + r.Float64()
	}
	return pts
}

func BenchmarkFront10k3D(b *testing.B) {
	pts := benchPoints(10000, 3)
	for b.Loop() {
		Front(pts, dirs3)
	}
}

func BenchmarkSort2k3D(b *testing.B) {
	pts := benchPoints(2000, 3)
	for b.Loop() {
		Sort(pts, dirs3)
	}
}

func BenchmarkHypervolume3D(b *testing.B) {
	pts := benchPoints(10000, 3)
	var fp [][]float64
	for _, i := range Front(pts, dirs3) {
		fp = append(fp, pts[i])
	}
	b.ReportMetric(float64(len(fp)), "front-points")
	ref := []float64{0, 10, 10}
	for b.Loop() {
		if _, err := Hypervolume(fp, dirs3, ref); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHypervolume2D(b *testing.B) {
	pts := benchPoints(10000, 2)
	ref := []float64{0, 10}
	for b.Loop() {
		if _, err := Hypervolume(pts, dirs2, ref); err != nil {
			b.Fatal(err)
		}
	}
}
