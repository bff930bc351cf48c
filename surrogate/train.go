package surrogate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Loss is the training objective of a booster.
type Loss string

const (
	LossSquared  Loss = "regression" // squared error, identity link
	LossLogistic Loss = "binary"     // log loss, sigmoid link; labels 0/1
)

// GBDTConfig holds the booster's hyper-parameters (LightGBM's names in comments).
type GBDTConfig struct {
	Loss             Loss
	NumTrees         int     // num_iterations (upper bound with early stopping)
	LearningRate     float64 // shrinkage
	MaxDepth         int     // max_depth (<= 0: unlimited)
	MaxLeaves        int     // num_leaves
	MinDataInLeaf    int     // min_data_in_leaf
	MinHessianInLeaf float64 // min_sum_hessian_in_leaf
	Lambda           float64 // lambda_l2
	MinGain          float64 // min_gain_to_split
	RowSample        float64 // bagging_fraction, drawn anew each iteration (1: all rows)
	ColSample        float64 // feature_fraction, drawn anew each tree (1: all columns)
	MaxBins          int     // max_bin (quantile bins per feature, <= 255)
	// EarlyStoppingRounds stops after that many iterations without a better
	// validation loss and keeps the best iteration (0: off).
	EarlyStoppingRounds int
	// EarlyStoppingTolerance is the relative improvement of the validation
	// loss that counts as better (keeps long, useless tails off the model).
	EarlyStoppingTolerance float64
	// ValidationFraction is held out for early stopping when Train is given no
	// validation set.
	ValidationFraction float64
	Seed               uint64
}

// DefaultGBDTConfig suits a few hundred to a few thousand tuning trials.
func DefaultGBDTConfig() GBDTConfig {
	return GBDTConfig{
		Loss: LossSquared, NumTrees: 300, LearningRate: 0.1, MaxDepth: 6, MaxLeaves: 15,
		MinDataInLeaf: 3, MinHessianInLeaf: 1e-3, Lambda: 1, MinGain: 0,
		RowSample: 0.9, ColSample: 0.9, MaxBins: 64,
		EarlyStoppingRounds: 20, EarlyStoppingTolerance: 1e-3, ValidationFraction: 0.2, Seed: 1,
	}
}

func (c GBDTConfig) check() error {
	switch {
	case c.Loss != LossSquared && c.Loss != LossLogistic:
		return fmt.Errorf("unknown loss %q", c.Loss)
	case c.NumTrees < 1:
		return errors.New("NumTrees must be >= 1")
	case !(c.LearningRate > 0 && c.LearningRate <= 1):
		return errors.New("LearningRate must be in (0, 1]")
	case c.MaxLeaves < 2:
		return errors.New("MaxLeaves must be >= 2")
	case c.MinDataInLeaf < 1:
		return errors.New("MinDataInLeaf must be >= 1")
	case c.MinHessianInLeaf < 0 || c.Lambda < 0 || c.MinGain < 0:
		return errors.New("MinHessianInLeaf, Lambda and MinGain must be >= 0")
	case !(c.RowSample > 0 && c.RowSample <= 1) || !(c.ColSample > 0 && c.ColSample <= 1):
		return errors.New("RowSample and ColSample must be in (0, 1]")
	case c.MaxBins < 2 || c.MaxBins > 255:
		return errors.New("MaxBins must be in 2..255")
	case c.EarlyStoppingTolerance < 0 || c.EarlyStoppingTolerance >= 1:
		return errors.New("EarlyStoppingTolerance must be in [0, 1)")
	case c.ValidationFraction < 0 || c.ValidationFraction >= 1:
		return errors.New("ValidationFraction must be in [0, 1)")
	}
	return nil
}

// Dataset is a dense row-major training matrix with labels.
type Dataset struct {
	X [][]float64
	Y []float64
}

// Booster is a trained model: its trees in LightGBM layout plus what the
// trainer saw (margins of the training rows, validation curve).
type Booster struct {
	Loss  Loss
	Trees []lgbTree // the first tree's leaves include the initial score
	Init  float64
	// TrainMargin is the trainer's raw score (before the sigmoid for the
	// logistic loss) of every training row, at the kept iteration.
	TrainMargin []float64
	ValidLoss   []float64 // per iteration, when validating
	BestIter    int       // iterations kept
	NumFeatures int
	infos       []string
}

// binMapper maps a feature's values to quantile bins: bin b holds values
// x <= upper[b] (and > upper[b-1]); split "bin <= b" is "x <= upper[b]",
// exactly what LightGBM and leaves evaluate, so training and inference agree
// bit for bit.
type binMapper struct {
	upper [][]float64 // per feature, ascending; last is +Inf
}

func newBinMapper(x [][]float64, rows []int, nf, maxBins int) *binMapper {
	m := &binMapper{upper: make([][]float64, nf)}
	vals := make([]float64, len(rows))
	for j := 0; j < nf; j++ {
		for i, r := range rows {
			vals[i] = x[r][j]
		}
		sort.Float64s(vals)
		uniq := vals[:0:0]
		for i, v := range vals {
			if i == 0 || v != vals[i-1] {
				uniq = append(uniq, v)
			}
		}
		var cuts []float64
		if len(uniq) <= maxBins {
			for i := 0; i+1 < len(uniq); i++ {
				cuts = append(cuts, midpoint(uniq[i], uniq[i+1]))
			}
		} else {
			// Quantile cuts on the sorted values, each moved to the midpoint
			// between the cut value and the next distinct value.
			for k := 1; k < maxBins; k++ {
				v := vals[k*len(vals)/maxBins]
				i := sort.SearchFloat64s(uniq, v)
				if i+1 < len(uniq) {
					c := midpoint(uniq[i], uniq[i+1])
					if len(cuts) == 0 || c > cuts[len(cuts)-1] {
						cuts = append(cuts, c)
					}
				}
			}
		}
		m.upper[j] = append(cuts, math.Inf(1))
	}
	return m
}

// midpoint of a < b, never equal to b (so b lands right of the cut).
func midpoint(a, b float64) float64 {
	m := a + (b-a)/2
	if m >= b || math.IsInf(m, 0) {
		m = math.Nextafter(b, math.Inf(-1))
	}
	if m < a {
		m = a
	}
	return m
}

func (m *binMapper) bin(j int, v float64) uint8 {
	return uint8(sort.SearchFloat64s(m.upper[j], v)) // first upper >= v
}

func (m *binMapper) binRows(x [][]float64, nf int) []uint8 {
	out := make([]uint8, len(x)*nf)
	for i, row := range x {
		for j := 0; j < nf; j++ {
			out[i*nf+j] = m.bin(j, row[j])
		}
	}
	return out
}

// binTree mirrors one lgbTree in bin space for the trainer's own updates.
type binTree struct {
	feature []int
	bin     []uint8
	left    []int
	right   []int
	value   []float64 // leaf outputs (shrunk)
}

func (t *binTree) leaf(row []uint8) int {
	if len(t.feature) == 0 {
		return 0
	}
	n := 0
	for {
		var c int
		if row[t.feature[n]] <= t.bin[n] {
			c = t.left[n]
		} else {
			c = t.right[n]
		}
		if c < 0 {
			return ^c
		}
		n = c
	}
}

type histEntry struct {
	g, h float64
	n    int32
}

type leafState struct {
	rows  []int // indices into the training rows
	g, h  float64
	depth int
	hist  []histEntry
	// best split
	gain     float64
	feature  int
	bin      int
	lg, lh   float64
	ln       int
	hasSplit bool
}

// TrainGBDT fits a booster. valid may be nil: then, with early stopping on,
// ValidationFraction of the rows is held out (seeded). Rows must be finite
// and of equal length; logistic labels must be 0 or 1.
func TrainGBDT(train Dataset, valid *Dataset, cfg GBDTConfig) (*Booster, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("gbdt config: %w", err)
	}
	if len(train.X) == 0 || len(train.X) != len(train.Y) {
		return nil, fmt.Errorf("%w: %d rows, %d labels", ErrNoData, len(train.X), len(train.Y))
	}
	nf := len(train.X[0])
	if nf == 0 {
		return nil, errors.New("gbdt: rows have no features")
	}
	if err := checkData(train, nf, cfg.Loss, "train"); err != nil {
		return nil, err
	}
	x := append([][]float64(nil), train.X...)
	y := append([]float64(nil), train.Y...)
	tr := make([]int, len(x))
	for i := range tr {
		tr[i] = i
	}
	var va []int
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6762_6474))
	switch {
	case valid != nil:
		if len(valid.X) != len(valid.Y) {
			return nil, fmt.Errorf("gbdt: validation has %d rows, %d labels", len(valid.X), len(valid.Y))
		}
		if err := checkData(*valid, nf, cfg.Loss, "validation"); err != nil {
			return nil, err
		}
		for i := range valid.X {
			va = append(va, len(x))
			x, y = append(x, valid.X[i]), append(y, valid.Y[i])
		}
	case cfg.EarlyStoppingRounds > 0 && cfg.ValidationFraction > 0 && len(x) >= 10:
		perm := rng.Perm(len(x))
		nv := int(math.Round(cfg.ValidationFraction * float64(len(x))))
		va = append([]int(nil), perm[:nv]...)
		tr = append([]int(nil), perm[nv:]...)
		sort.Ints(va)
		sort.Ints(tr)
	}
	bd := newBinnedData(x, tr, nf, cfg.MaxBins)
	return trainBinned(bd, y, tr, va, cfg, rng), nil
}

func checkData(d Dataset, nf int, loss Loss, what string) error {
	for i, r := range d.X {
		if len(r) != nf {
			return fmt.Errorf("gbdt: %s row %d has %d features, want %d", what, i, len(r), nf)
		}
		for j, v := range r {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("gbdt: %s row %d feature %d is not finite", what, i, j)
			}
		}
		y := d.Y[i]
		if math.IsNaN(y) || math.IsInf(y, 0) || loss == LossLogistic && y != 0 && y != 1 {
			return fmt.Errorf("gbdt: %s label %d (%v) invalid for %s loss", what, i, y, loss)
		}
	}
	return nil
}

// binnedData is a matrix binned once, shared by the members of a bag.
type binnedData struct {
	x      [][]float64
	nf     int
	bm     *binMapper
	binned []uint8 // row-major
}

// newBinnedData bins every row of x with cuts computed from the rows in fit.
func newBinnedData(x [][]float64, fit []int, nf, maxBins int) *binnedData {
	bm := newBinMapper(x, fit, nf, maxBins)
	return &binnedData{x: x, nf: nf, bm: bm, binned: bm.binRows(x, nf)}
}

// trainBinned boosts on the rows tr (duplicates allowed, as a bootstrap
// draws them) and stops early on the rows va. Inputs are checked.
func trainBinned(bd *binnedData, y []float64, tr, va []int, cfg GBDTConfig, rng *rand.Rand) *Booster {
	nf := bd.nf
	n := len(tr)
	offsets := make([]int, nf+1)
	for j := 0; j < nf; j++ {
		offsets[j+1] = offsets[j] + len(bd.bm.upper[j])
	}
	// Features with at least two distinct values among the training rows.
	var usable []int
	for j := 0; j < nf; j++ {
		first := bd.binned[tr[0]*nf+j]
		for _, r := range tr[1:] {
			if bd.binned[r*nf+j] != first {
				usable = append(usable, j)
				break
			}
		}
	}
	var sum float64
	for _, r := range tr {
		sum += y[r]
	}
	init := sum / float64(n)
	if cfg.Loss == LossLogistic {
		p := math.Min(math.Max(init, 1e-6), 1-1e-6)
		init = math.Log(p / (1 - p))
	}
	// F holds the margin of each training position (0 before the first
	// tree, which carries init in its leaves, as leaves will sum it).
	F := make([]float64, n)
	vF := make([]float64, len(va))
	g := make([]float64, n)
	h := make([]float64, n)
	rowBins := make([]uint8, n*nf) // training positions' bins, contiguous
	for i, r := range tr {
		copy(rowBins[i*nf:(i+1)*nf], bd.binned[r*nf:(r+1)*nf])
	}
	b := &Booster{Loss: cfg.Loss, Init: init, NumFeatures: nf}
	b.infos = featureInfosRows(bd.x, tr, nf)
	bestLoss := math.Inf(1)
	bestIter := 0
	bestF := make([]float64, n)
	validating := len(va) > 0 && cfg.EarlyStoppingRounds > 0
	tg := &treeGrower{cfg: cfg, nf: nf, binned: rowBins, offsets: offsets, bm: bd.bm, nbins: offsets[nf]}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	rows := make([]int, 0, n)
	cols := make([]int, 0, len(usable))
	perm := make([]int, len(usable))
	for it := 0; it < cfg.NumTrees; it++ {
		base := 0.0
		if it == 0 {
			base = init
		}
		for i := range F {
			f := F[i] + base
			switch cfg.Loss {
			case LossLogistic:
				p := sigmoid(f)
				g[i], h[i] = p-y[tr[i]], math.Max(p*(1-p), 1e-16)
			default:
				g[i], h[i] = f-y[tr[i]], 1
			}
		}
		rows = rows[:0]
		if cfg.RowSample < 1 {
			for i := 0; i < n; i++ {
				if rng.Float64() < cfg.RowSample {
					rows = append(rows, i)
				}
			}
			if len(rows) == 0 {
				rows = append(rows, rng.IntN(n))
			}
		} else {
			rows = append(rows, all...)
		}
		cols = append(cols[:0], usable...)
		if cfg.ColSample < 1 && len(usable) > 1 {
			k := max(1, int(math.Ceil(cfg.ColSample*float64(len(usable)))))
			for i := range perm {
				perm[i] = i
			}
			for i := 0; i < k; i++ { // partial Fisher-Yates
				j := i + rng.IntN(len(perm)-i)
				perm[i], perm[j] = perm[j], perm[i]
			}
			sel := perm[:k]
			sort.Ints(sel)
			cols = cols[:0]
			for _, p := range sel {
				cols = append(cols, usable[p])
			}
		}
		lt, bt := tg.grow(rows, cols, g, h)
		if it == 0 {
			for l := range lt.LeafValue {
				lt.LeafValue[l] += init
				bt.value[l] += init
			}
		}
		for i := 0; i < n; i++ {
			F[i] += bt.value[bt.leaf(rowBins[i*nf:(i+1)*nf])]
		}
		b.Trees = append(b.Trees, lt)
		if !validating {
			continue
		}
		for i, r := range va {
			vF[i] += bt.value[bt.leaf(bd.binned[r*nf:(r+1)*nf])]
		}
		loss := lossOfRows(cfg.Loss, vF, y, va)
		b.ValidLoss = append(b.ValidLoss, loss)
		if bestIter == 0 || loss < bestLoss-cfg.EarlyStoppingTolerance*math.Abs(bestLoss) {
			bestLoss, bestIter = loss, it+1
			copy(bestF, F)
		} else if it+1-bestIter >= cfg.EarlyStoppingRounds {
			break
		}
	}
	if validating && bestIter > 0 {
		b.Trees = b.Trees[:bestIter]
		F = bestF
	}
	b.BestIter = len(b.Trees)
	b.TrainMargin = F
	return b
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func lossOfRows(l Loss, f, y []float64, rows []int) float64 {
	var s float64
	for i, r := range rows {
		if l == LossLogistic {
			p := math.Min(math.Max(sigmoid(f[i]), 1e-15), 1-1e-15)
			s -= y[r]*math.Log(p) + (1-y[r])*math.Log(1-p)
		} else {
			d := f[i] - y[r]
			s += d * d
		}
	}
	return s / float64(len(f))
}

func featureInfosRows(x [][]float64, rows []int, nf int) []string {
	out := make([]string, nf)
	for j := 0; j < nf; j++ {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range rows {
			lo, hi = math.Min(lo, x[r][j]), math.Max(hi, x[r][j])
		}
		if lo == hi {
			out[j] = "none" // LightGBM's mark for an unused (constant) feature
		} else {
			out[j] = "[" + fmtFloat(lo) + ":" + fmtFloat(hi) + "]"
		}
	}
	return out
}

type treeGrower struct {
	cfg     GBDTConfig
	nf      int
	binned  []uint8
	offsets []int
	bm      *binMapper
	nbins   int
	pool    [][]histEntry // free histograms
	aux     []int         // partition buffer
	rowBuf  []int         // the current tree's rows, partitioned in place
}

func (tg *treeGrower) getHist() []histEntry {
	if n := len(tg.pool); n > 0 {
		h := tg.pool[n-1]
		tg.pool = tg.pool[:n-1]
		clear(h)
		return h
	}
	return make([]histEntry, tg.nbins)
}

func (tg *treeGrower) putHist(h []histEntry) {
	if h != nil {
		tg.pool = append(tg.pool, h)
	}
}

func (tg *treeGrower) leafOutput(g, h float64) float64 {
	return -g / (h + tg.cfg.Lambda)
}

func (tg *treeGrower) score(g, h float64) float64 { return g * g / (h + tg.cfg.Lambda) }

func (tg *treeGrower) buildHist(ls *leafState, g, h []float64, cols []int) {
	ls.hist = tg.getHist()
	nf := tg.nf
	for _, r := range ls.rows {
		row := tg.binned[r*nf : (r+1)*nf]
		gr, hr := g[r], h[r]
		for _, j := range cols {
			e := &ls.hist[tg.offsets[j]+int(row[j])]
			e.g += gr
			e.h += hr
			e.n++
		}
	}
}

func (tg *treeGrower) findSplit(ls *leafState, cols []int) {
	ls.hasSplit = false
	ls.gain = 0
	if tg.cfg.MaxDepth > 0 && ls.depth >= tg.cfg.MaxDepth {
		return
	}
	if len(ls.rows) < 2*tg.cfg.MinDataInLeaf {
		return
	}
	parent := tg.score(ls.g, ls.h)
	n := len(ls.rows)
	for _, j := range cols {
		bins := ls.hist[tg.offsets[j]:tg.offsets[j+1]]
		var lg, lh float64
		var ln int
		for b := 0; b+1 < len(bins); b++ {
			lg += bins[b].g
			lh += bins[b].h
			ln += int(bins[b].n)
			if bins[b].n == 0 && b > 0 {
				// same partition as the previous bin; a later cut is never
				// better than the earliest of equal ones
				continue
			}
			rn := n - ln
			if ln < tg.cfg.MinDataInLeaf {
				continue
			}
			if rn < tg.cfg.MinDataInLeaf {
				break
			}
			rg, rh := ls.g-lg, ls.h-lh
			if lh < tg.cfg.MinHessianInLeaf || rh < tg.cfg.MinHessianInLeaf {
				continue
			}
			gain := tg.score(lg, lh) + tg.score(rg, rh) - parent
			if gain > tg.cfg.MinGain && gain > ls.gain+1e-12 {
				ls.gain, ls.feature, ls.bin = gain, j, b
				ls.lg, ls.lh, ls.ln = lg, lh, ln
				ls.hasSplit = true
			}
		}
	}
}

// grow builds one tree leaf-wise (best gain first), LightGBM style: the
// split leaf keeps its index for the left child, the right child becomes a
// new leaf, and the new internal node takes the next node index.
func (tg *treeGrower) grow(rows, cols []int, g, h []float64) (lgbTree, binTree) {
	cfg := tg.cfg
	tg.rowBuf = append(tg.rowBuf[:0], rows...)
	root := &leafState{rows: tg.rowBuf}
	for _, r := range rows {
		root.g += g[r]
		root.h += h[r]
	}
	tg.buildHist(root, g, h, cols)
	tg.findSplit(root, cols)
	leaves := []*leafState{root}
	var t lgbTree
	var bt binTree
	// parent[l] is the internal node whose child is leaf l and the side (-1: root).
	parentNode := []int{-1}
	parentLeft := []bool{false}
	for len(leaves) < cfg.MaxLeaves {
		best := -1
		for l, ls := range leaves {
			if ls.hasSplit && (best < 0 || ls.gain > leaves[best].gain) {
				best = l
			}
		}
		if best < 0 {
			break
		}
		ls := leaves[best]
		node := len(t.SplitFeature)
		newLeaf := len(leaves)
		j, b := ls.feature, ls.bin
		t.SplitFeature = append(t.SplitFeature, j)
		t.SplitGain = append(t.SplitGain, ls.gain)
		t.Threshold = append(t.Threshold, tg.bm.upper[j][b])
		t.DecisionType = append(t.DecisionType, dtDefaultLeft) // missing type none
		t.LeftChild = append(t.LeftChild, ^best)
		t.RightChild = append(t.RightChild, ^newLeaf)
		t.InternalValue = append(t.InternalValue, tg.leafOutput(ls.g, ls.h)*cfg.LearningRate)
		t.InternalWeight = append(t.InternalWeight, ls.h)
		t.InternalCount = append(t.InternalCount, len(ls.rows))
		bt.feature = append(bt.feature, j)
		bt.bin = append(bt.bin, uint8(b))
		bt.left = append(bt.left, ^best)
		bt.right = append(bt.right, ^newLeaf)
		if p := parentNode[best]; p >= 0 {
			if parentLeft[best] {
				t.LeftChild[p], bt.left[p] = node, node
			} else {
				t.RightChild[p], bt.right[p] = node, node
			}
		}
		// Partition the leaf's rows in place (stable).
		nf := tg.nf
		nl := 0
		tg.aux = tg.aux[:0]
		for _, r := range ls.rows {
			if tg.binned[r*nf+j] <= uint8(b) {
				ls.rows[nl] = r
				nl++
			} else {
				tg.aux = append(tg.aux, r)
			}
		}
		copy(ls.rows[nl:], tg.aux)
		lr, rr := ls.rows[:nl:nl], ls.rows[nl:]
		left := &leafState{rows: lr, g: ls.lg, h: ls.lh, depth: ls.depth + 1}
		right := &leafState{rows: rr, g: ls.g - ls.lg, h: ls.h - ls.lh, depth: ls.depth + 1}
		// Histogram of the smaller child, the other by subtraction.
		small, large := left, right
		if len(rr) < len(lr) {
			small, large = right, left
		}
		tg.buildHist(small, g, h, cols)
		large.hist = ls.hist
		for k := range large.hist {
			large.hist[k].g -= small.hist[k].g
			large.hist[k].h -= small.hist[k].h
			large.hist[k].n -= small.hist[k].n
		}
		ls.hist = nil
		tg.findSplit(left, cols)
		tg.findSplit(right, cols)
		leaves[best] = left
		leaves = append(leaves, right)
		parentNode[best], parentLeft[best] = node, true
		parentNode = append(parentNode, node)
		parentLeft = append(parentLeft, false)
	}
	t.LeafValue = make([]float64, len(leaves))
	t.LeafWeight = make([]float64, len(leaves))
	t.LeafCount = make([]int, len(leaves))
	for l, ls := range leaves {
		tg.putHist(ls.hist)
		ls.hist = nil
		t.LeafValue[l] = tg.leafOutput(ls.g, ls.h) * cfg.LearningRate
		t.LeafWeight[l] = ls.h
		t.LeafCount[l] = len(ls.rows)
	}
	t.Shrinkage = cfg.LearningRate
	bt.value = append([]float64(nil), t.LeafValue...)
	return t, bt
}

// Model returns the booster as a LightGBM model with the given feature names
// (nil: Column_i).
func (b *Booster) model(names []string) *lgbModel {
	m := &lgbModel{Version: "v3", MaxFeatureIdx: b.NumFeatures - 1, Trees: b.Trees, FeatureInfos: b.infos}
	if len(names) == b.NumFeatures {
		m.FeatureNames = names
	}
	if b.Loss == LossLogistic {
		m.Objective = "binary sigmoid:1"
	} else {
		m.Objective = "regression"
	}
	return m
}

// LightGBMText writes the booster in LightGBM's v3 text format.
func (b *Booster) LightGBMText(names []string) []byte { return b.model(names).MarshalText() }

// smoothedBooster is the constant classifier of pos positives among n rows:
// the Laplace-smoothed probability (pos + 1) / (n + 2), never 0 or 1.
func smoothedBooster(pos, n, nf int) *Booster {
	p := (float64(pos) + 1) / (float64(n) + 2)
	return constantBooster(LossLogistic, math.Log(p/(1-p)), nf)
}

// constantBooster is a one-leaf model that always answers v (a margin for
// the logistic loss).
func constantBooster(l Loss, v float64, nf int) *Booster {
	return &Booster{Loss: l, Init: v, NumFeatures: nf, BestIter: 1,
		Trees: []lgbTree{{LeafValue: []float64{v}, LeafWeight: []float64{0}, LeafCount: []int{0}, Shrinkage: 1}}}
}
