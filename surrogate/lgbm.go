package surrogate

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dmitryikh/leaves"
)

// LightGBM decision_type bits (LightGBM's tree.h): bit 0 categorical, bit 1
// default left, bits 2-3 missing type (0 none, 1 zero, 2 NaN).
const (
	dtDefaultLeft = 1 << 1
	dtMissingNaN  = 2 << 2
)

// lgbTree is one tree in LightGBM's array layout: internal nodes 0..n-1
// (root 0), children >= 0 are internal nodes, < 0 are leaves (^child).
type lgbTree struct {
	SplitFeature   []int
	SplitGain      []float64
	Threshold      []float64
	DecisionType   []int
	LeftChild      []int
	RightChild     []int
	LeafValue      []float64
	LeafWeight     []float64
	LeafCount      []int
	InternalValue  []float64
	InternalWeight []float64
	InternalCount  []int
	Shrinkage      float64
}

func (t *lgbTree) numLeaves() int { return len(t.LeafValue) }

// lgbModel is a single-output LightGBM model.
type lgbModel struct {
	Version       string // "v2" or "v3"
	Objective     string // "regression" or "binary sigmoid:1"
	MaxFeatureIdx int
	FeatureNames  []string // len MaxFeatureIdx+1, or nil
	FeatureInfos  []string // len MaxFeatureIdx+1, or nil
	Trees         []lgbTree
}

// Limits bound what a model file may contain before anything parses it.
type Limits struct {
	MaxBytes    int // whole file
	MaxTrees    int
	MaxLeaves   int // per tree
	MaxFeatures int
}

// DefaultLimits are generous for tuning surrogates (a few hundred trees of
// a few dozen leaves over a hundred features) and small enough that a
// hostile file cannot exhaust memory.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 64 << 20, MaxTrees: 100_000, MaxLeaves: 1 << 17, MaxFeatures: 1 << 16}
}

// --- writing

func fmtFloat(f float64) string {
	if f == 0 {
		return "0" // not "-0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writeList writes "key=v1 v2 ...", each value as format writes it.
func writeList[T any](b *bytes.Buffer, key string, v []T, format func(T) string) {
	b.WriteString(key)
	b.WriteByte('=')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(format(x))
	}
	b.WriteByte('\n')
}

func (t *lgbTree) write(b *bytes.Buffer, idx int) {
	fmt.Fprintf(b, "Tree=%d\n", idx)
	fmt.Fprintf(b, "num_leaves=%d\n", t.numLeaves())
	b.WriteString("num_cat=0\n")
	if t.numLeaves() > 1 {
		writeList(b, "split_feature", t.SplitFeature, strconv.Itoa)
		writeList(b, "split_gain", orZeros(t.SplitGain, len(t.SplitFeature)), fmtFloat)
		writeList(b, "threshold", t.Threshold, fmtFloat)
		writeList(b, "decision_type", t.DecisionType, strconv.Itoa)
		writeList(b, "left_child", t.LeftChild, strconv.Itoa)
		writeList(b, "right_child", t.RightChild, strconv.Itoa)
	}
	writeList(b, "leaf_value", t.LeafValue, fmtFloat)
	writeList(b, "leaf_weight", orZeros(t.LeafWeight, t.numLeaves()), fmtFloat)
	writeList(b, "leaf_count", orZeros(t.LeafCount, t.numLeaves()), strconv.Itoa)
	if t.numLeaves() > 1 {
		writeList(b, "internal_value", orZeros(t.InternalValue, len(t.SplitFeature)), fmtFloat)
		writeList(b, "internal_weight", orZeros(t.InternalWeight, len(t.SplitFeature)), fmtFloat)
		writeList(b, "internal_count", orZeros(t.InternalCount, len(t.SplitFeature)), strconv.Itoa)
	}
	b.WriteString("is_linear=0\n")
	fmt.Fprintf(b, "shrinkage=%s\n", fmtFloat(t.Shrinkage))
	b.WriteByte('\n') // exactly one blank line ends a tree (leaves breaks on three)
}

// orZeros is v when it has n values, else n zeros.
func orZeros[T any](v []T, n int) []T {
	if len(v) == n {
		return v
	}
	return make([]T, n)
}

// MarshalText writes the model in LightGBM's v3 text format. tree_sizes holds
// the exact byte size of every tree block, one token per tree.
func (m *lgbModel) MarshalText() []byte {
	blocks := make([][]byte, len(m.Trees))
	for i := range m.Trees {
		var tb bytes.Buffer
		m.Trees[i].write(&tb, i)
		blocks[i] = tb.Bytes()
	}
	var b bytes.Buffer
	b.WriteString("tree\n")
	b.WriteString("version=v3\n")
	b.WriteString("num_class=1\n")
	b.WriteString("num_tree_per_iteration=1\n")
	b.WriteString("label_index=0\n")
	fmt.Fprintf(&b, "max_feature_idx=%d\n", m.MaxFeatureIdx)
	fmt.Fprintf(&b, "objective=%s\n", m.Objective)
	names := m.FeatureNames
	if len(names) != m.MaxFeatureIdx+1 {
		names = make([]string, m.MaxFeatureIdx+1)
		for i := range names {
			names[i] = fmt.Sprintf("Column_%d", i)
		}
	}
	fmt.Fprintf(&b, "feature_names=%s\n", strings.Join(names, " "))
	infos := m.FeatureInfos
	if len(infos) != m.MaxFeatureIdx+1 {
		infos = make([]string, m.MaxFeatureIdx+1)
		for i := range infos {
			infos[i] = "none"
		}
	}
	fmt.Fprintf(&b, "feature_infos=%s\n", strings.Join(infos, " "))
	b.WriteString("tree_sizes=")
	for i, blk := range blocks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(len(blk)))
	}
	b.WriteString("\n\n")
	for _, blk := range blocks {
		b.Write(blk)
	}
	b.WriteString("end of trees\n")
	return b.Bytes()
}

// --- parsing and validation

const lgbFormat = "lightgbm"

// parseLightGBM reads a LightGBM text model strictly and validates it: size,
// header fields, version v2/v3, one output, objective, tree count against
// tree_sizes, per-tree array lengths, node and feature indices in range, and
// that every tree is a proper binary tree rooted at node 0.
func parseLightGBM(data []byte, lim Limits) (*lgbModel, error) {
	if len(data) > lim.MaxBytes {
		return nil, modelErr(lgbFormat, -1, "", "file is %d bytes, limit %d", len(data), lim.MaxBytes)
	}
	if len(data) == 0 {
		return nil, modelErr(lgbFormat, -1, "", "empty file")
	}
	lines := strings.Split(string(data), "\n")
	i := 0
	header := map[string]string{}
	// Header: key=value lines up to the first Tree= line.
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || l == "tree" {
			continue
		}
		if strings.HasPrefix(l, "Tree=") || l == "end of trees" {
			break
		}
		k, v, _ := strings.Cut(l, "=") // a bare key (average_output) has no value
		if strings.Contains(v, "=") {
			return nil, modelErr(lgbFormat, -1, k, "line %d: value contains '='", i+1)
		}
		if _, dup := header[k]; dup {
			return nil, modelErr(lgbFormat, -1, k, "listed twice")
		}
		header[k] = v
	}
	m := &lgbModel{}
	switch v := header["version"]; v {
	case "v2", "v3":
		m.Version = v
	case "":
		return nil, modelErr(lgbFormat, -1, "version", "missing (not a LightGBM text model?)")
	default:
		return nil, modelErr(lgbFormat, -1, "version", "%q not supported (v2 or v3 only; LightGBM 4.x writes v4)", clip(v))
	}
	for _, k := range []string{"num_class", "num_tree_per_iteration"} {
		n, err := strconv.Atoi(header[k])
		if err != nil || n != 1 {
			return nil, modelErr(lgbFormat, -1, k, "must be 1 (single-output models only), got %q", clip(header[k]))
		}
	}
	if _, ok := header["average_output"]; ok {
		return nil, modelErr(lgbFormat, -1, "average_output", "random-forest models are not supported")
	}
	mfi, err := strconv.Atoi(header["max_feature_idx"])
	if err != nil || mfi < 0 || mfi >= lim.MaxFeatures {
		return nil, modelErr(lgbFormat, -1, "max_feature_idx", "want 0..%d, got %q", lim.MaxFeatures-1, clip(header["max_feature_idx"]))
	}
	m.MaxFeatureIdx = mfi
	obj := header["objective"]
	switch {
	case obj == "regression" || strings.HasPrefix(obj, "regression "):
		m.Objective = "regression"
	case obj == "binary sigmoid:1":
		m.Objective = obj
	case obj == "":
		return nil, modelErr(lgbFormat, -1, "objective", "missing")
	default:
		return nil, modelErr(lgbFormat, -1, "objective", "%q not supported (regression or binary sigmoid:1)", clip(obj))
	}
	if s, ok := header["feature_names"]; ok {
		names := strings.Split(s, " ")
		if len(names) != mfi+1 {
			return nil, modelErr(lgbFormat, -1, "feature_names", "%d names for %d features", len(names), mfi+1)
		}
		for _, n := range names {
			if err := checkFeatureName(n); err != nil {
				return nil, modelErr(lgbFormat, -1, "feature_names", "%v", err)
			}
		}
		m.FeatureNames = names
	}
	if s, ok := header["feature_infos"]; ok {
		infos := strings.Split(s, " ")
		if len(infos) != mfi+1 {
			return nil, modelErr(lgbFormat, -1, "feature_infos", "%d entries for %d features", len(infos), mfi+1)
		}
		for _, f := range infos {
			if f == "" || strings.ContainsAny(f, "\r\t") {
				return nil, modelErr(lgbFormat, -1, "feature_infos", "empty or malformed entry")
			}
		}
		m.FeatureInfos = infos
	}
	ts, ok := header["tree_sizes"]
	if !ok {
		return nil, modelErr(lgbFormat, -1, "tree_sizes", "missing")
	}
	sizes := strings.Split(ts, " ")
	if len(sizes) > lim.MaxTrees {
		return nil, modelErr(lgbFormat, -1, "tree_sizes", "%d trees, limit %d", len(sizes), lim.MaxTrees)
	}
	for _, s := range sizes {
		if n, err := strconv.Atoi(s); err != nil || n < 0 {
			return nil, modelErr(lgbFormat, -1, "tree_sizes", "token %q is not a size (one token per tree, single spaces)", clip(s))
		}
	}
	// Trees.
	for i < len(lines) {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			i++
			continue
		}
		if l == "end of trees" {
			break
		}
		idx, ok := strings.CutPrefix(l, "Tree=")
		if !ok {
			return nil, modelErr(lgbFormat, len(m.Trees), "", "line %d: want Tree=%d, got %q", i+1, len(m.Trees), clip(l))
		}
		if idx != strconv.Itoa(len(m.Trees)) {
			return nil, modelErr(lgbFormat, len(m.Trees), "", "line %d: trees out of order (Tree=%s)", i+1, clip(idx))
		}
		if len(m.Trees) >= len(sizes) {
			return nil, modelErr(lgbFormat, len(m.Trees), "tree_sizes", "lists %d trees but the file has more", len(sizes))
		}
		i++
		fields := map[string]string{}
		for ; i < len(lines); i++ {
			l := strings.TrimSpace(lines[i])
			if l == "" || strings.HasPrefix(l, "Tree=") || l == "end of trees" {
				break
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok || strings.Contains(v, "=") {
				return nil, modelErr(lgbFormat, len(m.Trees), "", "line %d: want key=value, got %q", i+1, clip(l))
			}
			if _, dup := fields[k]; dup {
				return nil, modelErr(lgbFormat, len(m.Trees), k, "listed twice")
			}
			fields[k] = v
		}
		t, err := parseLGBTree(fields, len(m.Trees), mfi, lim)
		if err != nil {
			return nil, err
		}
		m.Trees = append(m.Trees, t)
	}
	if len(m.Trees) != len(sizes) {
		return nil, modelErr(lgbFormat, -1, "tree_sizes", "lists %d trees, file has %d", len(sizes), len(m.Trees))
	}
	return m, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// lgbArray parses tree field key of f, n values separated by spaces, into
// *dst; an absent optional field leaves it nil.
func lgbArray[T any](f map[string]string, ti int, dst *[]T, key string, n int, required bool, what string, parse func(string) (T, bool)) error {
	s, ok := f[key]
	if !ok {
		if required {
			return modelErr(lgbFormat, ti, key, "missing")
		}
		return nil
	}
	toks := strings.Split(s, " ")
	if len(toks) != n {
		return modelErr(lgbFormat, ti, key, "%d values, want %d", len(toks), n)
	}
	out := make([]T, n)
	for i, tok := range toks {
		x, ok := parse(tok)
		if !ok {
			return modelErr(lgbFormat, ti, key, "value %d (%q) is not %s", i, clip(tok), what)
		}
		out[i] = x
	}
	*dst = out
	return nil
}

func parseLGBTree(f map[string]string, ti, mfi int, lim Limits) (lgbTree, error) {
	var t lgbTree
	nl, err := strconv.Atoi(f["num_leaves"])
	if err != nil || nl < 1 || nl > lim.MaxLeaves {
		return t, modelErr(lgbFormat, ti, "num_leaves", "want 1..%d, got %q", lim.MaxLeaves, clip(f["num_leaves"]))
	}
	if c, ok := f["num_cat"]; ok && c != "0" {
		return t, modelErr(lgbFormat, ti, "num_cat", "categorical splits are not supported (num_cat=%s)", clip(c))
	}
	if l, ok := f["is_linear"]; ok && l != "0" {
		return t, modelErr(lgbFormat, ti, "is_linear", "linear trees are not supported (leaves ignores them)")
	}
	floats := func(dst *[]float64, key string, n int, required bool) error {
		return lgbArray(f, ti, dst, key, n, required, "a finite number", func(tok string) (float64, bool) {
			x, err := strconv.ParseFloat(tok, 64)
			return x, err == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
		})
	}
	ints := func(dst *[]int, key string, n int, required bool) error {
		return lgbArray(f, ti, dst, key, n, required, "a 32-bit integer", func(tok string) (int, bool) {
			x, err := strconv.ParseInt(tok, 10, 32)
			return int(x), err == nil
		})
	}
	for _, err := range []error{floats(&t.LeafValue, "leaf_value", nl, true), floats(&t.LeafWeight, "leaf_weight", nl, false), ints(&t.LeafCount, "leaf_count", nl, false)} {
		if err != nil {
			return t, err
		}
	}
	if s, ok := f["shrinkage"]; ok {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return t, modelErr(lgbFormat, ti, "shrinkage", "not a finite number")
		}
		t.Shrinkage = x
	} else {
		t.Shrinkage = 1
	}
	if nl == 1 {
		return t, nil
	}
	nn := nl - 1
	for _, err := range []error{
		ints(&t.SplitFeature, "split_feature", nn, true), floats(&t.Threshold, "threshold", nn, true),
		ints(&t.DecisionType, "decision_type", nn, true), ints(&t.LeftChild, "left_child", nn, true),
		ints(&t.RightChild, "right_child", nn, true), floats(&t.SplitGain, "split_gain", nn, false),
		floats(&t.InternalValue, "internal_value", nn, false), floats(&t.InternalWeight, "internal_weight", nn, false),
		ints(&t.InternalCount, "internal_count", nn, false),
	} {
		if err != nil {
			return t, err
		}
	}
	return t, t.validate(lgbFormat, ti, mfi)
}

// validate checks a tree's structure: features in range, decision types
// numerical with a known missing type, children in range, every node except
// the root and every leaf referenced exactly once, everything reachable.
func (t *lgbTree) validate(format string, ti, mfi int) error {
	nl := len(t.LeafValue)
	if nl < 1 {
		return modelErr(format, ti, "num_leaves", "no leaves")
	}
	for _, v := range t.LeafValue {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return modelErr(format, ti, "leaf_value", "not finite")
		}
	}
	nn := nl - 1
	if nn == 0 {
		return nil
	}
	if len(t.SplitFeature) != nn || len(t.Threshold) != nn || len(t.DecisionType) != nn ||
		len(t.LeftChild) != nn || len(t.RightChild) != nn {
		return modelErr(format, ti, "", "node arrays must have num_leaves-1 = %d entries", nn)
	}
	innerSeen := make([]bool, nn)
	leafSeen := make([]bool, nl)
	for n := 0; n < nn; n++ {
		if f := t.SplitFeature[n]; f < 0 || f > mfi {
			return modelErr(format, ti, "split_feature", "node %d: feature %d outside 0..%d", n, f, mfi)
		}
		if th := t.Threshold[n]; math.IsNaN(th) || math.IsInf(th, 0) {
			return modelErr(format, ti, "threshold", "node %d: not finite", n)
		}
		dt := t.DecisionType[n]
		switch {
		case dt < 0 || dt > 15:
			return modelErr(format, ti, "decision_type", "node %d: %d out of range", n, dt)
		case dt&1 != 0:
			return modelErr(format, ti, "decision_type", "node %d: categorical split not supported", n)
		case (dt>>2)&3 == 3:
			return modelErr(format, ti, "decision_type", "node %d: unknown missing type", n)
		}
		for _, c := range []int{t.LeftChild[n], t.RightChild[n]} {
			if c >= 0 {
				if c == 0 || c >= nn {
					return modelErr(format, ti, "child", "node %d: child node %d outside 1..%d", n, c, nn-1)
				}
				if innerSeen[c] {
					return modelErr(format, ti, "child", "node %d referenced twice", c)
				}
				innerSeen[c] = true
			} else {
				l := ^c
				if l >= nl {
					return modelErr(format, ti, "child", "node %d: leaf %d outside 0..%d", n, l, nl-1)
				}
				if leafSeen[l] {
					return modelErr(format, ti, "child", "leaf %d referenced twice", l)
				}
				leafSeen[l] = true
			}
		}
	}
	// Reachability from the root (rules out cycles among non-root nodes).
	reached := 0
	stack := []int{0}
	visited := make([]bool, nn)
	visited[0] = true
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		reached++
		for _, c := range []int{t.LeftChild[n], t.RightChild[n]} {
			if c > 0 && !visited[c] {
				visited[c] = true
				stack = append(stack, c)
			}
		}
	}
	if reached != nn {
		return modelErr(format, ti, "child", "%d of %d nodes unreachable from the root", nn-reached, nn)
	}
	for l, ok := range leafSeen {
		if !ok {
			return modelErr(format, ti, "child", "leaf %d is not referenced", l)
		}
	}
	return nil
}

// --- loading into leaves

// lgbPredictor is a validated model loaded in leaves. Text is the canonical
// LightGBM v3 text it was loaded from (what the store keeps).
type lgbPredictor struct {
	model *lgbModel
	text  []byte
	ens   *leaves.Ensemble
}

// loadModel validates m, writes it canonically and loads that text through
// leaves; leaves never sees bytes this package did not write.
func loadModel(m *lgbModel) (*lgbPredictor, error) {
	if len(m.Trees) == 0 {
		return nil, modelErr(lgbFormat, -1, "", "no trees")
	}
	for i := range m.Trees {
		if err := m.Trees[i].validate(lgbFormat, i, m.MaxFeatureIdx); err != nil {
			return nil, err
		}
	}
	text := m.MarshalText()
	ens, err := leaves.LGEnsembleFromReader(bufio.NewReader(bytes.NewReader(text)), true)
	if err != nil {
		return nil, fmt.Errorf("%w: leaves: %v", ErrInvalidModel, err)
	}
	if ens.NEstimators() != len(m.Trees) {
		return nil, fmt.Errorf("%w: leaves loaded %d of %d trees", ErrInvalidModel, ens.NEstimators(), len(m.Trees))
	}
	return &lgbPredictor{model: m, text: text, ens: ens}, nil
}

// ParseLightGBM validates a LightGBM text model (v2/v3, single output,
// regression or binary) and loads it through leaves.
func parseAndLoadLightGBM(data []byte, lim Limits) (*lgbPredictor, error) {
	m, err := parseLightGBM(data, lim)
	if err != nil {
		return nil, err
	}
	return loadModel(m)
}

// numFeatures is the number of input columns the model reads.
func (p *lgbPredictor) numFeatures() int { return p.model.MaxFeatureIdx + 1 }

// predictDense predicts every row of a row-major matrix with ncols columns
// (ncols >= numFeatures) through leaves, with the model's transformation
// (sigmoid for binary models).
func (p *lgbPredictor) predictDense(vals []float64, nrows, ncols, threads int, out []float64) error {
	if nrows == 0 {
		return nil
	}
	if ncols < p.numFeatures() {
		return fmt.Errorf("model reads %d features, rows have %d", p.numFeatures(), ncols)
	}
	return p.ens.PredictDense(vals, nrows, ncols, out, 0, threads)
}
