package surrogate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

const xgbFormat = "xgboost-json"

// XGBoost's JSON model (save_model("m.json"), XGBoost >= 1.0), the parts a
// gbtree regression or binary model needs.
type xgbFile struct {
	Learner *struct {
		FeatureNames     []string `json:"feature_names"`
		GradientBooster  *xgbGB   `json:"gradient_booster"`
		LearnerModelParm *struct {
			BaseScore  string `json:"base_score"`
			NumClass   string `json:"num_class"`
			NumFeature string `json:"num_feature"`
			NumTarget  string `json:"num_target"`
		} `json:"learner_model_param"`
		Objective *struct {
			Name string `json:"name"`
		} `json:"objective"`
	} `json:"learner"`
	Version []int `json:"version"`
}

type xgbGB struct {
	Name  string `json:"name"`
	Model *struct {
		Trees    []xgbTree `json:"trees"`
		TreeInfo []int     `json:"tree_info"`
	} `json:"model"`
}

type xgbTree struct {
	LeftChildren    []int         `json:"left_children"`
	RightChildren   []int         `json:"right_children"`
	SplitIndices    []int         `json:"split_indices"`
	SplitConditions []float64     `json:"split_conditions"`
	BaseWeights     []float64     `json:"base_weights"`
	DefaultLeft     []flexBool    `json:"default_left"`
	SplitType       []int         `json:"split_type"`
	SumHessian      []float64     `json:"sum_hessian"`
	LossChanges     []float64     `json:"loss_changes"`
	Categories      []int         `json:"categories"`
	TreeParam       *xgbTreeParam `json:"tree_param"`
}

type xgbTreeParam struct {
	NumDeleted string `json:"num_deleted"`
	NumFeature string `json:"num_feature"`
	NumNodes   string `json:"num_nodes"`
}

// flexBool reads XGBoost's default_left entries, written as 0/1 or as
// booleans depending on the version.
type flexBool bool

func (b *flexBool) UnmarshalJSON(d []byte) error {
	switch strings.TrimSpace(string(d)) {
	case "0", "false":
		*b = false
	case "1", "true":
		*b = true
	default:
		return fmt.Errorf("default_left entry %s is not 0/1/true/false", clip(string(d)))
	}
	return nil
}

// parseXGBNumber reads XGBoost's string-encoded numbers: "5E-1", and
// "[5E-1]" as newer releases write base_score.
func parseXGBNumber(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = strings.TrimSpace(s[1 : len(s)-1])
		if strings.Contains(s, ",") {
			return 0, fmt.Errorf("vector %q: multi-target models are not supported", clip(s))
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a finite number", clip(s))
	}
	return f, nil
}

// xgbThreshold converts XGBoost's split "float32(x) < t" into LightGBM's
// "x <= thr" for float64 inputs. XGBoost casts every feature to float32
// (rounding to nearest, ties to even) before comparing with the float32
// threshold t; float32(x) < t exactly when float32(x) <= p, p the float32
// just below t, i.e. when x is below the midpoint m of p and t, or equal to
// it with p the even neighbour (the tie rounds to p). m is exact in float64.
func xgbThreshold(t32 float32) float64 {
	p := math.Nextafter32(t32, float32(math.Inf(-1)))
	if math.IsInf(float64(p), -1) {
		// t is the lowest finite float32: only values that round to -Inf are below.
		return -(math.MaxFloat32 + math.Ldexp(1, 103))
	}
	m := (float64(p) + float64(t32)) / 2
	if math.Float32bits(p)&1 == 0 {
		return m // the tie rounds down to p: left
	}
	return math.Nextafter(m, math.Inf(-1))
}

// ConvertXGBoostJSON turns a current XGBoost JSON model (gbtree booster,
// objective reg:squarederror / reg:linear / reg:absoluteerror /
// reg:pseudohubererror / binary:logistic / binary:logitraw) into an
// equivalent LightGBM v3 text model. Split semantics are translated
// (x < t with float32 features becomes x <= thr on float64, missing values
// follow default_left), base_score is added in margin space (logit for
// binary:logistic) to the first tree's leaves. Every field is validated; a
// malformed file is an error wrapping ErrInvalidModel.
func ConvertXGBoostJSON(data []byte) ([]byte, error) {
	m, err := convertXGBoost(data, DefaultLimits())
	if err != nil {
		return nil, err
	}
	return m.MarshalText(), nil
}

func convertXGBoost(data []byte, lim Limits) (*lgbModel, error) {
	bad := func(tree int, field, f string, args ...any) error {
		return modelErr(xgbFormat, tree, field, f, args...)
	}
	if len(data) > lim.MaxBytes {
		return nil, bad(-1, "", "file is %d bytes, limit %d", len(data), lim.MaxBytes)
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return nil, bad(-1, "", "not a JSON object (XGBoost's binary/UBJSON formats are not read; save the model as .json)")
	}
	var f xgbFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, bad(-1, "", "%v (UBJSON and binary models are not read; save the model as .json)", err)
	}
	l := f.Learner
	if l == nil || l.GradientBooster == nil || l.LearnerModelParm == nil || l.Objective == nil {
		return nil, bad(-1, "learner", "missing learner, gradient_booster, learner_model_param or objective")
	}
	if len(f.Version) > 0 && f.Version[0] < 1 {
		return nil, bad(-1, "version", "XGBoost %v predates the JSON format", f.Version)
	}
	gb := l.GradientBooster
	if gb.Name != "gbtree" {
		return nil, bad(-1, "gradient_booster.name", "%q not supported (gbtree only)", clip(gb.Name))
	}
	if gb.Model == nil {
		return nil, bad(-1, "gradient_booster.model", "missing")
	}
	p := l.LearnerModelParm
	if nc := strings.TrimSpace(p.NumClass); nc != "" && nc != "0" && nc != "1" {
		return nil, bad(-1, "num_class", "multi-class models are not supported (num_class %s)", clip(nc))
	}
	if nt := strings.TrimSpace(p.NumTarget); nt != "" && nt != "1" {
		return nil, bad(-1, "num_target", "multi-target models are not supported (num_target %s)", clip(nt))
	}
	nf, err := strconv.Atoi(strings.TrimSpace(p.NumFeature))
	if err != nil || nf < 1 || nf > lim.MaxFeatures {
		return nil, bad(-1, "num_feature", "want 1..%d, got %q", lim.MaxFeatures, clip(p.NumFeature))
	}
	base, err := parseXGBNumber(p.BaseScore)
	if err != nil {
		return nil, bad(-1, "base_score", "%v", err)
	}
	out := &lgbModel{Version: "v3", MaxFeatureIdx: nf - 1}
	var margin float64
	switch l.Objective.Name {
	case "reg:squarederror", "reg:linear", "reg:absoluteerror", "reg:pseudohubererror":
		out.Objective = "regression"
		margin = base
	case "binary:logitraw":
		out.Objective = "regression" // raw margin out
		margin = base
	case "binary:logistic":
		out.Objective = "binary sigmoid:1"
		if !(base > 0 && base < 1) {
			return nil, bad(-1, "base_score", "%v is not a probability in (0, 1)", base)
		}
		margin = math.Log(base / (1 - base))
	default:
		return nil, bad(-1, "objective", "%q not supported (reg:squarederror, binary:logistic, ...)", clip(l.Objective.Name))
	}
	if len(l.FeatureNames) > 0 {
		if len(l.FeatureNames) != nf {
			return nil, bad(-1, "feature_names", "%d names for %d features", len(l.FeatureNames), nf)
		}
		for _, n := range l.FeatureNames {
			if err := checkFeatureName(n); err != nil {
				return nil, bad(-1, "feature_names", "%v", err)
			}
		}
		out.FeatureNames = append([]string(nil), l.FeatureNames...)
	}
	trees := gb.Model.Trees
	if len(trees) > lim.MaxTrees {
		return nil, bad(-1, "trees", "%d trees, limit %d", len(trees), lim.MaxTrees)
	}
	if len(gb.Model.TreeInfo) != 0 && len(gb.Model.TreeInfo) != len(trees) {
		return nil, bad(-1, "tree_info", "%d entries for %d trees", len(gb.Model.TreeInfo), len(trees))
	}
	for i, g := range gb.Model.TreeInfo {
		if g != 0 {
			return nil, bad(i, "tree_info", "output group %d: single-output models only", g)
		}
	}
	for i := range trees {
		t, err := convertXGBTree(&trees[i], i, nf, lim)
		if err != nil {
			return nil, err
		}
		out.Trees = append(out.Trees, t)
	}
	if len(out.Trees) == 0 {
		out.Trees = []lgbTree{{LeafValue: []float64{0}, Shrinkage: 1}}
	}
	for k := range out.Trees[0].LeafValue {
		out.Trees[0].LeafValue[k] += margin
	}
	return out, nil
}

func convertXGBTree(x *xgbTree, ti, nf int, lim Limits) (lgbTree, error) {
	bad := func(field, f string, args ...any) error { return modelErr(xgbFormat, ti, field, f, args...) }
	n := len(x.LeftChildren)
	if n < 1 {
		return lgbTree{}, bad("left_children", "empty tree")
	}
	if n > 2*lim.MaxLeaves {
		return lgbTree{}, bad("left_children", "%d nodes, limit %d", n, 2*lim.MaxLeaves)
	}
	if len(x.RightChildren) != n || len(x.SplitIndices) != n || len(x.SplitConditions) != n || len(x.DefaultLeft) != n {
		return lgbTree{}, bad("", "left_children, right_children, split_indices, split_conditions and default_left must have %d entries", n)
	}
	if x.TreeParam != nil && strings.TrimSpace(x.TreeParam.NumNodes) != "" {
		if nn, err := strconv.Atoi(strings.TrimSpace(x.TreeParam.NumNodes)); err != nil || nn != n {
			return lgbTree{}, bad("tree_param.num_nodes", "%q, arrays have %d nodes", clip(x.TreeParam.NumNodes), n)
		}
	}
	for _, st := range x.SplitType {
		if st != 0 {
			return lgbTree{}, bad("split_type", "categorical splits are not supported")
		}
	}
	if len(x.Categories) > 0 {
		return lgbTree{}, bad("categories", "categorical splits are not supported")
	}
	optional := func(v []float64, name string) ([]float64, error) {
		if len(v) != 0 && len(v) != n {
			return nil, bad(name, "%d entries for %d nodes", len(v), n)
		}
		if len(v) == 0 {
			return nil, nil
		}
		return v, nil
	}
	hess, err := optional(x.SumHessian, "sum_hessian")
	if err != nil {
		return lgbTree{}, err
	}
	gains, err := optional(x.LossChanges, "loss_changes")
	if err != nil {
		return lgbTree{}, err
	}
	bw, err := optional(x.BaseWeights, "base_weights")
	if err != nil {
		return lgbTree{}, err
	}
	// Walk from the root; every reachable node referenced once.
	seen := make([]bool, n)
	seen[0] = true
	inner := map[int]int{} // xgb node -> lightgbm internal index
	leaf := map[int]int{}  // xgb node -> lightgbm leaf index
	order := []int{0}
	for k := 0; k < len(order); k++ {
		id := order[k]
		l, r := x.LeftChildren[id], x.RightChildren[id]
		if l == -1 && r == -1 {
			leaf[id] = len(leaf)
			continue
		}
		if l == -1 || r == -1 {
			return lgbTree{}, bad("left_children", "node %d has one child", id)
		}
		inner[id] = len(inner)
		for _, c := range []int{l, r} {
			if c <= 0 || c >= n {
				return lgbTree{}, bad("left_children", "node %d: child %d outside 1..%d", id, c, n-1)
			}
			if seen[c] {
				return lgbTree{}, bad("left_children", "node %d referenced twice", c)
			}
			seen[c] = true
			order = append(order, c)
		}
	}
	reached := len(order)
	if x.TreeParam != nil && strings.TrimSpace(x.TreeParam.NumDeleted) != "" {
		del, err := strconv.Atoi(strings.TrimSpace(x.TreeParam.NumDeleted))
		if err != nil || del < 0 {
			return lgbTree{}, bad("tree_param.num_deleted", "%q", clip(x.TreeParam.NumDeleted))
		}
		if reached+del != n {
			return lgbTree{}, bad("left_children", "%d of %d nodes unreachable, num_deleted says %d", n-reached, n, del)
		}
	} else if reached != n {
		return lgbTree{}, bad("left_children", "%d of %d nodes unreachable from the root", n-reached, n)
	}
	t := lgbTree{Shrinkage: 1}
	t.LeafValue = make([]float64, len(leaf))
	t.LeafWeight = make([]float64, len(leaf))
	t.LeafCount = make([]int, len(leaf))
	ni := len(inner)
	t.SplitFeature = make([]int, ni)
	t.SplitGain = make([]float64, ni)
	t.Threshold = make([]float64, ni)
	t.DecisionType = make([]int, ni)
	t.LeftChild = make([]int, ni)
	t.RightChild = make([]int, ni)
	t.InternalValue = make([]float64, ni)
	t.InternalWeight = make([]float64, ni)
	t.InternalCount = make([]int, ni)
	ref := func(c int) int {
		if li, ok := leaf[c]; ok {
			return ^li
		}
		return inner[c]
	}
	for _, id := range order {
		if li, ok := leaf[id]; ok {
			// XGBoost keeps the (shrunk) float32 leaf value in split_conditions.
			v := float64(float32(x.SplitConditions[id]))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return lgbTree{}, bad("split_conditions", "leaf %d value not a finite float32", id)
			}
			t.LeafValue[li] = v
			if hess != nil {
				t.LeafWeight[li] = finite(hess[id])
			}
			continue
		}
		k := inner[id]
		fi := x.SplitIndices[id]
		if fi < 0 || fi >= nf {
			return lgbTree{}, bad("split_indices", "node %d: feature %d outside 0..%d", id, fi, nf-1)
		}
		c := x.SplitConditions[id]
		if math.IsNaN(c) || math.IsInf(c, 0) || math.Abs(c) > math.MaxFloat32 {
			return lgbTree{}, bad("split_conditions", "node %d: threshold %v not a finite float32", id, c)
		}
		t.SplitFeature[k] = fi
		t.Threshold[k] = xgbThreshold(float32(c))
		dt := dtMissingNaN
		if x.DefaultLeft[id] {
			dt |= dtDefaultLeft
		}
		t.DecisionType[k] = dt
		t.LeftChild[k] = ref(x.LeftChildren[id])
		t.RightChild[k] = ref(x.RightChildren[id])
		if gains != nil {
			t.SplitGain[k] = finite(gains[id])
		}
		if hess != nil {
			t.InternalWeight[k] = finite(hess[id])
		}
		if bw != nil {
			t.InternalValue[k] = finite(bw[id])
		}
	}
	if err := t.validate(xgbFormat, ti, nf-1); err != nil {
		return lgbTree{}, err
	}
	return t, nil
}
