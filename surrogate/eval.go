package surrogate

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"text/tabwriter"
)

// Report is a k-fold cross-validated quality report.
type Report struct {
	Folds      int           `json:"folds"`
	Samples    int           `json:"samples"`
	Objectives []ObjectiveCV `json:"objectives"`
	Feasible   int           `json:"feasible"`
	Infeasible int           `json:"infeasible"`
	// AUC of P(feasible) against the outcome; NaN-free: 0.5 when one class
	// is absent (then it says nothing).
	AUC float64 `json:"auc"`
}

// ObjectiveCV holds one objective's held-out figures, in metric units.
type ObjectiveCV struct {
	Name     string  `json:"name"`
	Metric   string  `json:"metric"`
	N        int     `json:"n"`
	R2       float64 `json:"r2"`
	MAPE     float64 `json:"mape"` // fraction
	Spearman float64 `json:"spearman"`
}

// Evaluate cross-validates opts on m: rows are shuffled (seeded by
// opts.Seed) into folds; each fold is predicted by a surrogate trained on
// the others. ctx is checked between folds.
func Evaluate(ctx context.Context, m *Matrix, opts Options, folds int) (*Report, error) {
	n := len(m.X)
	if folds < 2 {
		return nil, fmt.Errorf("evaluate: need >= 2 folds, got %d", folds)
	}
	if n < folds {
		return nil, fmt.Errorf("%w: %d samples for %d folds", ErrNoData, n, folds)
	}
	perm := rand.New(rand.NewPCG(opts.Seed, 0x6576_616c)).Perm(n)
	fold := make([]int, n)
	for k, i := range perm {
		fold[i] = k % folds
	}
	preds := make([]Prediction, n)
	for f := 0; f < folds; f++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tr := subMatrix(m, func(i int) bool { return fold[i] != f })
		s, err := TrainMatrix(tr, opts)
		if err != nil {
			return nil, fmt.Errorf("fold %d: %w", f+1, err)
		}
		var idx []int
		var x [][]float64
		for i := range m.X {
			if fold[i] == f {
				idx, x = append(idx, i), append(x, m.X[i])
			}
		}
		for j, p := range s.Predict(x) {
			preds[idx[j]] = p
		}
	}
	r := &Report{Folds: folds, Samples: n}
	for k, o := range m.Objectives {
		b := o.baselineOf(m.Schema)
		var p, y []float64
		for i := range m.X {
			if math.IsNaN(m.Y[k][i]) {
				continue
			}
			p = append(p, preds[i].Mean[k])
			y = append(y, o.value(m.Y[k][i], b.logOf(m.X[i])))
		}
		r.Objectives = append(r.Objectives, ObjectiveCV{Name: o.Name, Metric: o.Metric, N: len(y),
			R2: rSquared(p, y), MAPE: MAPE(p, y), Spearman: Spearman(p, y)})
	}
	var ps, ys []float64
	for i, f := range m.Feasible {
		if math.IsNaN(f) {
			continue
		}
		if f == 1 {
			r.Feasible++
		} else {
			r.Infeasible++
		}
		ps, ys = append(ps, preds[i].PFeasible), append(ys, f)
	}
	r.AUC = AUC(ps, ys)
	return r, nil
}

// subMatrix keeps the rows for which keep is true.
func subMatrix(m *Matrix, keep func(int) bool) *Matrix {
	out := &Matrix{Schema: m.Schema, Objectives: m.Objectives, Y: make([][]float64, len(m.Objectives))}
	for i := range m.X {
		if !keep(i) {
			continue
		}
		out.X = append(out.X, m.X[i])
		out.Feasible = append(out.Feasible, m.Feasible[i])
		for k := range m.Objectives {
			out.Y[k] = append(out.Y[k], m.Y[k][i])
		}
	}
	return out
}

// WriteText renders the report as a table.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d-fold cross-validation on %d samples\n", r.Folds, r.Samples)
	fmt.Fprintln(tw, "target\tmetric\tn\tR^2\tMAPE\tSpearman")
	for _, o := range r.Objectives {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.1f%%\t%.3f\n", o.Name, o.Metric, o.N, o.R2, 100*o.MAPE, o.Spearman)
	}
	if r.Feasible > 0 && r.Infeasible > 0 {
		fmt.Fprintf(tw, "feasible\tP(start)\t%d\tAUC %.3f\t\t(%d failed)\n", r.Feasible+r.Infeasible, r.AUC, r.Infeasible)
	} else {
		fmt.Fprintf(tw, "feasible\tP(start)\t%d\tAUC n/a\t\t(%d failed: one class only)\n", r.Feasible+r.Infeasible, r.Infeasible)
	}
	return tw.Flush()
}
