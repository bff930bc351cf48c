package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/stats"
	"github.com/vllm-tuner/tuner/trial"
)

// Run is one side of a comparison.
type Run struct {
	ID    string
	Model string
	// Matrix names the scenario matrix (its name or hash); empty when
	// unknown, which skips the check.
	Matrix string
	Cells  []Cell
}

// Cell is one scenario cell of a run.
type Cell struct {
	Name string
	// Samples by series (Metric.Series): per-request latencies in ms for
	// ttft, tpot, itl and e2el, per-window values for throughputs, in time
	// order (the tail tests permute blocks of neighbours).
	Samples map[string][]float64
	// Summary holds aggregate values by metric name (Metric.Name) for runs
	// without raw data (an imported summary); they are shown, not tested.
	Summary map[string]float64
}

// Correction is the multiple-testing correction over all cells x metrics.
type Correction int

const (
	// Holm is the Holm-Bonferroni step-down correction (the default).
	Holm Correction = iota
	// NoCorrection tests each cell x metric at Alpha on its own.
	NoCorrection
)

func (c Correction) String() string {
	if c == NoCorrection {
		return "none"
	}
	return "holm"
}

// MarshalText writes the correction's name in JSON reports.
func (c Correction) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Config sets the decision rule.
type Config struct {
	// Alpha is the family-wise significance level (default 0.05).
	Alpha      float64
	Correction Correction
	// Threshold is the smallest relative effect that counts, 0.05 = 5%.
	Threshold float64
	// Thresholds overrides Threshold per metric name.
	Thresholds map[string]float64
	// Metrics are tested in this order in every cell.
	Metrics []Metric
	// Method is the U test's p-value method (stats.Auto as scipy).
	Method stats.Method
	// Permutations bounds the tail tests; its Blocks permutes blocks of
	// neighbouring requests instead of single ones.
	Permutations stats.PermutationConfig
	// Seed makes the tail tests reproducible; each cell x metric draws from
	// its own stream derived from it, so results do not depend on order.
	Seed uint64
}

// DefaultConfig is the rule: alpha 0.05 with Holm, 5% threshold, the
// default metrics.
func DefaultConfig() Config {
	return Config{
		Alpha:        0.05,
		Correction:   Holm,
		Threshold:    0.05,
		Metrics:      DefaultMetrics(),
		Method:       stats.Auto,
		Permutations: tailPermutations(),
		Seed:         1,
	}
}

// tailPermutations permutes blocks of a tenth of a run: tail latencies come
// in clusters (a stalled host or engine slows every request in flight), and
// permuting single requests took two runs of one config, measured minutes
// apart, for a changed p99 in 1 of 8 pairs on the simulator (p 0.0002 where
// blocks give 0.05). Ten blocks a side still allow p down to 1e-5.
func tailPermutations() stats.PermutationConfig {
	c := stats.DefaultPermutationConfig()
	c.Blocks = 10
	return c
}

// ErrIncomparable is matched (errors.Is) by every *IncomparableError.
var ErrIncomparable = errors.New("runs are not comparable")

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("invalid gate config")

// IncomparableError says why two runs cannot be compared.
type IncomparableError struct {
	// What differs: "model", "matrix" or "cells".
	What      string
	Base, New string
	// For What == "cells": the cell names of each run.
	BaseCells, NewCells []string
}

func (e *IncomparableError) Error() string {
	if e.What == "cells" {
		return fmt.Sprintf("runs %s and %s share no cell: base has %s, new has %s",
			e.Base, e.New, strings.Join(e.BaseCells, ", "), strings.Join(e.NewCells, ", "))
	}
	return fmt.Sprintf("runs differ in %s: base %q, new %q", e.What, e.Base, e.New)
}

func (e *IncomparableError) Unwrap() error { return ErrIncomparable }

// Verdict is the decision for one cell x metric.
type Verdict string

const (
	Regression  Verdict = "regression"
	Improvement Verdict = "improvement"
	NoChange    Verdict = "no change"
	// Inconclusive: no significant change, but the runs are too noisy for
	// the test to have found one of the threshold's size (MDE > threshold):
	// "no change" would claim what the data cannot show.
	Inconclusive Verdict = "inconclusive"
	Untestable   Verdict = "untestable"
)

// Power is the chance of detecting a true effect of the minimum
// detectable effect's size (Row.MDE).
const Power = 0.8

// Row is the comparison of one metric in one cell. Floats that do not
// apply (no data, no test) are NaN and written as null in JSON.
type Row struct {
	Cell   string `json:"cell"`
	Metric Metric `json:"metric"`
	// Base and New are the metric's values (quantile of the samples, or the
	// summary value for summary-only data).
	Base  float64 `json:"base"`
	New   float64 `json:"new"`
	NBase int     `json:"n_base"`
	NNew  int     `json:"n_new"`
	// Effect is (New - Base) / Base; positive means larger, which is worse
	// for latencies and better for throughputs.
	Effect    float64 `json:"effect"`
	Threshold float64 `json:"threshold"`
	// Test names the test: "mann-whitney exact", "mann-whitney asymptotic",
	// "permutation" or "block permutation"; empty when untestable.
	Test      string  `json:"test,omitempty"`
	P         float64 `json:"p"`
	AdjustedP float64 `json:"p_adjusted"`
	// MDE is the minimum detectable effect: the smallest relative change
	// of the metric this comparison finds with 80% power (Power), from the
	// standard errors of both runs' values (stats.QuantileSE, over blocks
	// of neighbouring requests when the test uses blocks) at the level
	// the row is tested at after the correction (alpha/tests under Holm:
	// the level a lone regression among unchanged metrics must pass).
	MDE     float64 `json:"mde"`
	Verdict Verdict `json:"verdict"`
	// Reason explains an Untestable or Inconclusive verdict.
	Reason string `json:"reason,omitempty"`
	// se is the standard error of the effect, relative to Base.
	se float64
}

// MarshalJSON writes NaN floats as null (encoding/json rejects NaN).
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		Base      *float64 `json:"base"`
		New       *float64 `json:"new"`
		Effect    *float64 `json:"effect"`
		P         *float64 `json:"p"`
		AdjustedP *float64 `json:"p_adjusted"`
		MDE       *float64 `json:"mde"`
	}{plain(r), num(r.Base), num(r.New), num(r.Effect), num(r.P), num(r.AdjustedP), num(r.MDE)})
}

// Worse is the effect in the metric's bad direction: positive when the new
// run is worse.
func (r Row) Worse() float64 {
	if r.Metric.Direction == HigherIsBetter {
		return -r.Effect
	}
	return r.Effect
}

// SkippedCell is a cell present in only one of the runs.
type SkippedCell struct {
	Cell   string `json:"cell"`
	Reason string `json:"reason"`
}

// Report is the outcome of Compare.
type Report struct {
	Base       string     `json:"base"`
	New        string     `json:"new"`
	Model      string     `json:"model,omitempty"`
	Alpha      float64    `json:"alpha"`
	Correction Correction `json:"correction"`
	Threshold  float64    `json:"threshold"`
	// Tests is the number of tests in the corrected family.
	Tests   int           `json:"tests"`
	Rows    []Row         `json:"rows"`
	Skipped []SkippedCell `json:"skipped_cells,omitempty"`
	// Counts of rows by verdict.
	Regressions  int `json:"regressions"`
	Improvements int `json:"improvements"`
	Unchanged    int `json:"unchanged"`
	Inconclusive int `json:"inconclusive"`
	Untestable   int `json:"untestable"`
}

// Regressed reports whether any row is a regression (a CI job's exit 1).
func (r *Report) Regressed() bool { return r.Regressions > 0 }

// Undecided reports whether the gate cannot clear the new run: no
// regression, but at least one row inconclusive (a CI job's exit 3).
func (r *Report) Undecided() bool { return !r.Regressed() && r.Inconclusive > 0 }

func (c Config) validate() error {
	if !(c.Alpha > 0 && c.Alpha < 1) {
		return fmt.Errorf("%w: alpha %v not in (0, 1)", ErrConfig, c.Alpha)
	}
	if !(c.Threshold >= 0) || math.IsInf(c.Threshold, 0) {
		return fmt.Errorf("%w: threshold %v must be >= 0", ErrConfig, c.Threshold)
	}
	if len(c.Metrics) == 0 {
		return fmt.Errorf("%w: no metrics", ErrConfig)
	}
	if c.Correction != Holm && c.Correction != NoCorrection {
		return fmt.Errorf("%w: correction %d", ErrConfig, int(c.Correction))
	}
	if c.Method != stats.Auto && c.Method != stats.Exact && c.Method != stats.Asymptotic {
		return fmt.Errorf("%w: U test method %v", ErrConfig, c.Method)
	}
	if c.Permutations.Max < 1 || c.Permutations.Stop < 1 || c.Permutations.Blocks < 0 {
		return fmt.Errorf("%w: permutations need Max and Stop >= 1 and Blocks >= 0, got %+v", ErrConfig, c.Permutations)
	}
	seen := map[string]bool{}
	for _, m := range c.Metrics {
		if m.Name == "" || m.Series == "" || !(m.Quantile > 0 && m.Quantile < 1) {
			return fmt.Errorf("%w: metric %+v needs a name, a series and a quantile in (0, 1)", ErrConfig, m)
		}
		if seen[m.Name] {
			return fmt.Errorf("%w: metric %s listed twice", ErrConfig, m.Name)
		}
		seen[m.Name] = true
	}
	for name, v := range c.Thresholds {
		if !seen[name] {
			return fmt.Errorf("threshold for %q: %w (not among the tested metrics)", name, ErrUnknownMetric)
		}
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: threshold %v for %s must be >= 0", ErrConfig, v, name)
		}
	}
	return nil
}

// Compare tests every metric of every cell present in both runs and decides
// per the package rule. Cells in only one run are listed in
// Report.Skipped; runs with different models or matrices, or without a
// cell in common, give an *IncomparableError.
func Compare(base, next Run, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if base.Model != next.Model {
		return nil, &IncomparableError{What: "model", Base: base.Model, New: next.Model}
	}
	if base.Matrix != "" && next.Matrix != "" && base.Matrix != next.Matrix {
		return nil, &IncomparableError{What: "matrix", Base: base.Matrix, New: next.Matrix}
	}
	newCells := map[string]Cell{}
	for _, c := range next.Cells {
		if _, dup := newCells[c.Name]; dup {
			return nil, fmt.Errorf("run %s: cell %q listed twice", next.ID, c.Name)
		}
		newCells[c.Name] = c
	}
	rep := &Report{Base: base.ID, New: next.ID, Model: base.Model, Alpha: cfg.Alpha,
		Correction: cfg.Correction, Threshold: cfg.Threshold}
	baseNames := map[string]bool{}
	for _, bc := range base.Cells {
		if baseNames[bc.Name] {
			return nil, fmt.Errorf("run %s: cell %q listed twice", base.ID, bc.Name)
		}
		baseNames[bc.Name] = true
		nc, ok := newCells[bc.Name]
		if !ok {
			rep.Skipped = append(rep.Skipped, SkippedCell{bc.Name, "only in base " + base.ID})
			continue
		}
		for _, m := range cfg.Metrics {
			rep.Rows = append(rep.Rows, compareOne(bc, nc, m, cfg))
		}
	}
	for _, c := range next.Cells {
		if !baseNames[c.Name] {
			rep.Skipped = append(rep.Skipped, SkippedCell{c.Name, "only in new " + next.ID})
		}
	}
	if len(rep.Rows) == 0 {
		e := &IncomparableError{What: "cells", Base: base.ID, New: next.ID}
		for _, c := range base.Cells {
			e.BaseCells = append(e.BaseCells, c.Name)
		}
		for _, c := range next.Cells {
			e.NewCells = append(e.NewCells, c.Name)
		}
		return nil, e
	}
	decide(rep, cfg)
	return rep, nil
}

// compareOne computes values, effect and the raw p-value of one row.
func compareOne(bc, nc Cell, m Metric, cfg Config) Row {
	row := Row{Cell: bc.Name, Metric: m, Threshold: cfg.Threshold, Base: math.NaN(), New: math.NaN(),
		Effect: math.NaN(), P: math.NaN(), AdjustedP: math.NaN(), MDE: math.NaN(), se: math.NaN(), Verdict: Untestable}
	if t, ok := cfg.Thresholds[m.Name]; ok {
		row.Threshold = t
	}
	bs, ns := bc.Samples[m.Series], nc.Samples[m.Series]
	row.NBase, row.NNew = len(bs), len(ns)
	if len(bs) == 0 || len(ns) == 0 {
		// No raw data on a side: show summaries when both have them.
		bv, bok := summaryValue(bc, m, bs)
		nv, nok := summaryValue(nc, m, ns)
		row.Base, row.New = bv, nv
		switch {
		case bok && nok:
			row.Effect = relChange(bv, nv)
			row.Reason = "summary only: no per-request samples in " + missingSide(len(bs), len(ns)) + ", no test possible"
		default:
			row.Reason = "no " + m.Series + " data in " + missingSide(boolLen(bok), boolLen(nok))
		}
		return row
	}
	if err := finite(bs); err != nil {
		row.Reason = "base " + m.Series + " samples: " + err.Error()
		return row
	}
	if err := finite(ns); err != nil {
		row.Reason = "new " + m.Series + " samples: " + err.Error()
		return row
	}
	sb, sn := sorted(bs), sorted(ns)
	pct := m.Quantile * 100
	row.Base, row.New = trial.Percentile(sb, pct), trial.Percentile(sn, pct)
	row.Effect = relChange(row.Base, row.New)
	if row.Base == 0 {
		row.Reason = "base value is 0: no relative effect"
		return row
	}
	// Two-sided permutation and rank tests cannot go below 2/C(n1+n2, n1)
	// (n counting blocks for a block permutation): with fewer samples no
	// difference can ever be significant.
	n1, n2 := len(bs), len(ns)
	if blocked(cfg.Permutations, n1, n2) {
		n1, n2 = min(n1, cfg.Permutations.Blocks), min(n2, cfg.Permutations.Blocks)
	}
	if floor := minP(n1, n2); floor >= cfg.Alpha {
		row.Reason = fmt.Sprintf("too few samples (%d and %d): the smallest possible p is %.3g", len(bs), len(ns), floor)
		return row
	}
	blocks := blocked(cfg.Permutations, len(bs), len(ns))
	batches := 0
	if blocks {
		batches = cfg.Permutations.Blocks
	}
	seB, errB := stats.QuantileSE(bs, m.Quantile, batches)
	seN, errN := stats.QuantileSE(ns, m.Quantile, batches)
	if err := errors.Join(errB, errN); err != nil {
		row.Reason = err.Error()
		return row
	}
	row.se = math.Hypot(seB, seN) / math.Abs(row.Base)
	// The quantile's permutation test: a tail's test, and with blocks the
	// median's guard against serially dependent requests.
	perm := func() (float64, error) {
		rng := rand.New(rand.NewPCG(cfg.Seed, streamID(bc.Name, m.Name)))
		pc := cfg.Permutations
		if !blocked(pc, len(bs), len(ns)) {
			pc.Blocks = 0
		}
		// pct/100, the quantile trial.Percentile(s, pct) reads, to the bit.
		res, err := stats.QuantilePermutationTest(bs, ns, pct/100, pc, rng)
		return res.P, err
	}
	if m.Quantile == 0.5 {
		res, err := stats.MannWhitneyU(bs, ns, cfg.Method)
		if err != nil {
			row.Reason = err.Error()
			return row
		}
		row.Test, row.P = "mann-whitney "+res.Method.String(), res.P
		if blocks {
			// Both must reject: U's p-value assumes independent requests,
			// and requests of one run are not (a closed loop's batches set
			// the TTFT of every request in them, and TTFT medians of one
			// config moved -30% to +23% between runs with U's p down to
			// 1e-20); the block permutation of the median holds without
			// that assumption. The larger p-value is a valid test if either
			// is (an intersection-union test).
			bp, err := perm()
			if err != nil {
				row.Reason = err.Error()
				return row
			}
			row.Test, row.P = row.Test+" + block permutation", max(row.P, bp)
		}
	} else {
		p, err := perm()
		if err != nil {
			row.Reason = err.Error()
			return row
		}
		row.Test, row.P = "permutation", p
		if blocks {
			row.Test = "block permutation"
		}
	}
	row.Verdict, row.Reason = NoChange, ""
	return row
}

// minBlock is the fewest values a block must hold for blocks to be used:
// shorter series (a run's per-window throughputs, a handful of requests)
// are tested value by value, as a block of one or two values is no guard
// against dependence and only costs power.
const minBlock = 10

// blocked reports whether series of these lengths are tested by blocks.
func blocked(pc stats.PermutationConfig, n1, n2 int) bool {
	return pc.Blocks > 1 && min(n1, n2) >= minBlock*pc.Blocks
}

// decide applies the correction and the threshold rule, and counts.
func decide(rep *Report, cfg Config) {
	ps := make([]float64, len(rep.Rows))
	for i, r := range rep.Rows {
		ps[i] = r.P
		if r.Verdict != Untestable {
			rep.Tests++
		}
	}
	adj := ps
	level := cfg.Alpha
	if cfg.Correction == Holm {
		adj = stats.Holm(ps)
		level /= float64(max(1, rep.Tests))
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.AdjustedP = adj[i]
		if r.Verdict != Untestable {
			r.MDE = stats.MinDetectable(r.se, level, Power)
			switch sig := r.AdjustedP < cfg.Alpha; {
			case sig && r.Worse() > r.Threshold:
				r.Verdict = Regression
			case sig && r.Worse() < -r.Threshold:
				r.Verdict = Improvement
			case r.MDE > r.Threshold:
				r.Verdict = Inconclusive
				r.Reason = fmt.Sprintf("the runs' spread hides changes below %.1f%% (threshold %s)", 100*r.MDE, share(r.Threshold))
			default:
				r.Verdict = NoChange
			}
		}
		switch r.Verdict {
		case Regression:
			rep.Regressions++
		case Improvement:
			rep.Improvements++
		case NoChange:
			rep.Unchanged++
		case Inconclusive:
			rep.Inconclusive++
		default:
			rep.Untestable++
		}
	}
}

func summaryValue(c Cell, m Metric, samples []float64) (float64, bool) {
	if len(samples) > 0 {
		s := sorted(samples)
		return trial.Percentile(s, m.Quantile*100), true
	}
	v, ok := c.Summary[m.Name]
	if !ok {
		return math.NaN(), false
	}
	return v, true
}

func missingSide(nb, nn int) string {
	switch {
	case nb == 0 && nn == 0:
		return "base and new"
	case nb == 0:
		return "base"
	}
	return "new"
}

func boolLen(ok bool) int {
	if ok {
		return 1
	}
	return 0
}

func relChange(base, next float64) float64 {
	if base == 0 {
		return math.NaN()
	}
	return (next - base) / base
}

func finite(s []float64) error {
	for i, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("value %d is %v", i, v)
		}
	}
	return nil
}

func sorted(s []float64) []float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// minP is 2/C(n1+n2, n1), capped at 1: the smallest two-sided p-value of a
// rank or permutation test on samples of these sizes.
func minP(n1, n2 int) float64 {
	c := 1.0
	k := min(n1, n2)
	for i := 1; i <= k; i++ {
		c = c * float64(n1+n2-k+i) / float64(i)
		if c > 1e12 {
			return 0
		}
	}
	return math.Min(1, 2/c)
}

func streamID(cell, metric string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(cell))
	h.Write([]byte{0})
	h.Write([]byte(metric))
	return h.Sum64()
}
