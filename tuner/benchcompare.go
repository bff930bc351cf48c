package tuner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// DefaultGateThreshold is compare's default smallest effect that counts:
// the 5%, the same in README and --help. A lower threshold does not
// buy power the runs do not have: every row reports its minimum detectable
// effect, and a row that could not have found a change of the threshold's
// size is "inconclusive" (exit 3) instead of passing as "no change".
const DefaultGateThreshold = 0.05

// GateSpec is the regression gate's options as `tuner bench compare` takes
// them (--alpha, --threshold, --threshold-for, --no-correction, --metrics).
type GateSpec struct {
	Alpha        float64  `json:"alpha"`
	Threshold    string   `json:"threshold"`               // "5%" or "0.05"
	ThresholdFor []string `json:"threshold_for,omitempty"` // METRIC=SHARE
	NoCorrection bool     `json:"no_correction,omitempty"`
	Metrics      string   `json:"metrics,omitempty"` // comma-separated
}

// DefaultGateSpec returns the defaults of compare's flags.
func DefaultGateSpec() GateSpec {
	return GateSpec{Alpha: 0.05, Threshold: fmt.Sprintf("%g%%", 100*DefaultGateThreshold)}
}

// ParseShare reads "2%", "2.5 %" or "0.025" as a fraction.
func ParseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a share like 2%% or 0.02", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

// Config turns the options into a gate.Config; errors are usage errors
// naming the flag.
func (g GateSpec) Config() (gate.Config, error) {
	cfg := gate.DefaultConfig()
	cfg.Alpha = g.Alpha
	if !(cfg.Alpha > 0 && cfg.Alpha < 1) {
		return cfg, Usagef("--alpha %v: want a level in (0, 1)", cfg.Alpha)
	}
	th, err := ParseShare(g.Threshold)
	if err != nil {
		return cfg, Usagef("--threshold %v", err)
	}
	cfg.Threshold = th
	if g.NoCorrection {
		cfg.Correction = gate.NoCorrection
	}
	if list := g.Metrics; list != "" {
		cfg.Metrics = nil
		for _, name := range strings.Split(list, ",") {
			m, err := gate.ParseMetric(strings.TrimSpace(name))
			if err != nil {
				return cfg, Usagef("--metrics: %w", err)
			}
			cfg.Metrics = append(cfg.Metrics, m)
		}
	}
	for _, kv := range g.ThresholdFor {
		name, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cfg, Usagef("--threshold-for %q: want METRIC=SHARE, e.g. tpot_p50=3%%", kv)
		}
		if _, err := gate.ParseMetric(name); err != nil {
			return cfg, Usagef("--threshold-for: %w", err)
		}
		share, err := ParseShare(v)
		if err != nil {
			return cfg, Usagef("--threshold-for %s: %v", name, err)
		}
		if cfg.Thresholds == nil {
			cfg.Thresholds = map[string]float64{}
		}
		cfg.Thresholds[name] = share
	}
	return cfg, nil
}

// RunSeq is the sequence number of a run ID ("r12" -> 12; 0 if malformed).
func RunSeq(id string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(id, "r"), 10, 64)
	return n
}

// ResolveRun reads a run reference: r<N>, latest, or latest:K=V[,K=V] (the
// newest run with those labels other than exclude). A missing run is a
// usage error.
func ResolveRun(ctx context.Context, st store.DB, ref, exclude string) (store.Run, error) {
	sel, ok := strings.CutPrefix(ref, "latest:")
	if !ok {
		r, err := st.Run(ctx, ref)
		if errors.Is(err, store.ErrNotFound) {
			return r, Usagef("%w", err)
		}
		return r, err
	}
	labels, err := ParseLabels(strings.Split(sel, ","), false)
	if err != nil || len(labels) == 0 {
		return store.Run{}, Usagef("run %q: want latest:KEY=VALUE[,KEY=VALUE]", ref)
	}
	runs, err := st.Runs(ctx, store.RunFilter{Labels: labels})
	if err != nil {
		return store.Run{}, err
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].ID != exclude {
			return runs[i], nil
		}
	}
	return store.Run{}, Usagef("run %s: no run with label %s (other than %s)", ref, sel, exclude)
}

// BaselineOfTier is the newest finished (ok) run of tier and next's model
// stored before next.
func BaselineOfTier(ctx context.Context, st store.DB, tier string, next store.Run) (store.Run, error) {
	r, ok, err := PreviousRun(ctx, st, store.RunFilter{Tier: tier, Model: next.Model}, next)
	if err == nil && !ok {
		err = Usagef("--baseline-tier %s: no finished %s run of model %s before %s", tier, tier, next.Model, next.ID)
	}
	return r, err
}

// PreviousRun is the newest finished (ok) run matching f stored before
// next (false when there is none).
func PreviousRun(ctx context.Context, st store.DB, f store.RunFilter, next store.Run) (store.Run, bool, error) {
	runs, err := st.Runs(ctx, f)
	if err != nil {
		return store.Run{}, false, err
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if r := runs[i]; r.State == store.RunOK && RunSeq(r.ID) < RunSeq(next.ID) {
			return r, true, nil
		}
	}
	return store.Run{}, false, nil
}

// comparable refuses runs the gate cannot judge: in progress, or nothing
// measured.
func comparable(r store.Run, side string) error {
	switch {
	case r.State == store.RunRunning:
		return Usagef("%s run %s is still running (started %s): compare it once it has finished", side, r.ID, r.Start.Format("2006-01-02 15:04:05"))
	case len(r.Cells) == 0:
		return Usagef("%s run %s has no measured cell (%s: %s)", side, r.ID, r.State, r.Reason)
	}
	return nil
}

// LoadGateRun reads a stored run with its raw data as the gate's input.
func LoadGateRun(ctx context.Context, st store.DB, r *store.Run, metrics []gate.Metric) (gate.Run, error) {
	return bench.GateRun(r, func(i int) ([]byte, error) { return st.RunRaw(ctx, r.ID, i) }, metrics)
}

// CompareSpec is one comparison: BASE and NEW as run references, or
// BaselineTier and NEW, with the gate's options.
type CompareSpec struct {
	Base, New    string
	BaselineTier string
	Gate         GateSpec
}

// Comparison is the gate's report on two stored runs.
type Comparison struct {
	Base, New store.Run
	Report    *gate.Report
}

// ErrNoTest reports a comparison where no statistical test was possible
// (runs without per-request data, or every row untestable): the report
// holds the summaries side by side.
var ErrNoTest = errors.New("no test was possible")

// CompareRuns resolves the runs and runs the regression gate on them, as
// `tuner bench compare` does. Usage errors name what is wrong (a missing
// run, the same run twice, a run still running, incomparable runs); a
// report without a single test comes with an error wrapping ErrNoTest (and
// usage).
func CompareRuns(ctx context.Context, st store.DB, cs CompareSpec) (*Comparison, error) {
	cfg, err := cs.Gate.Config()
	if err != nil {
		return nil, err
	}
	next, err := ResolveRun(ctx, st, cs.New, "")
	if err != nil {
		return nil, err
	}
	var base store.Run
	if cs.BaselineTier != "" {
		base, err = BaselineOfTier(ctx, st, cs.BaselineTier, next)
	} else {
		base, err = ResolveRun(ctx, st, cs.Base, next.ID)
	}
	if err != nil {
		return nil, err
	}
	if base.ID == next.ID {
		return nil, Usagef("BASE and NEW are the same run %s", base.ID)
	}
	if err := comparable(base, "base"); err != nil {
		return nil, err
	}
	if err := comparable(next, "new"); err != nil {
		return nil, err
	}
	gb, err := LoadGateRun(ctx, st, &base, cfg.Metrics)
	if err != nil {
		return nil, err
	}
	gn, err := LoadGateRun(ctx, st, &next, cfg.Metrics)
	if err != nil {
		return nil, err
	}
	rep, err := gate.Compare(gb, gn, cfg)
	if errors.Is(err, gate.ErrIncomparable) || errors.Is(err, gate.ErrConfig) || errors.Is(err, gate.ErrUnknownMetric) {
		return nil, AsUsage(err)
	}
	if err != nil {
		return nil, err
	}
	out := &Comparison{Base: base, New: next, Report: rep}
	if rep.Tests == 0 && !rep.Regressed() {
		var why []string
		for _, r := range []*store.Run{&base, &next} {
			if !r.HasRaw() {
				why = append(why, fmt.Sprintf("run %s has no per-request data (%s)", r.ID, r.Source))
			}
		}
		if len(why) == 0 {
			why = append(why, "every comparison is untestable (see the reasons above)")
		}
		return out, UsageError{fmt.Errorf("%w: %s; the summaries are compared above", ErrNoTest, strings.Join(why, ", "))}
	}
	return out, nil
}

// WriteRunCSV writes the raw per-request data of every cell of r that kept
// it as CSV (`tuner bench export`).
func WriteRunCSV(ctx context.Context, st store.DB, r *store.Run, w io.Writer) error {
	cw := bench.NewCSVWriter(w)
	for i := range r.Cells {
		cell := &r.Cells[i]
		if cell.RawKey == "" {
			continue // imported summary without per-request data
		}
		raw, err := st.RunRaw(ctx, r.ID, i)
		if err != nil {
			return err
		}
		reqs, err := bench.DecodeRaw(raw)
		if err != nil {
			return fmt.Errorf("run %s cell %s: %w", r.ID, cell.Name, err)
		}
		if err := cw.Write(r.ID, cell, reqs); err != nil {
			return err
		}
	}
	return cw.Flush()
}

// CheckCurveMetric validates a QPS-vs-latency chart's latency metric.
func CheckCurveMetric(metric string) error {
	var probe trial.Metrics
	if _, ok := probe.Value(metric); !ok || !strings.Contains(metric, "_") {
		return Usagef("--metric %q: want <ttft|tpot|itl|e2el>_<mean|p50|p90|p95|p99|max>", metric)
	}
	return nil
}

// RunCurves is each cell's QPS-vs-latency curve of metric as a chart
// (with the first SLO bound on metric): what `tuner bench plot` draws.
func RunCurves(r *store.Run, metric string) chart.Figure {
	var out []chart.CurveSeries
	limit := 0.0
	for i := range r.Cells {
		cell := &r.Cells[i]
		s := chart.CurveSeries{Name: cell.Name}
		for j := range cell.Levels {
			l := &cell.Levels[j]
			v, _ := l.Metrics.Value(metric)
			s.Points = append(s.Points, chart.CurvePoint{Label: l.LoadString(), QPS: l.Metrics.RequestThroughput, Latency: v})
		}
		slices.SortStableFunc(s.Points, func(a, b chart.CurvePoint) int { return cmp.Compare(a.QPS, b.QPS) })
		out = append(out, s)
		for _, b := range cell.Workload.SLO {
			if b.Metric == metric && limit == 0 {
				limit = b.Limit
			}
		}
	}
	return chart.Curve(fmt.Sprintf("run %s: %s on %s", r.ID, r.Model, r.Matrix), metric, limit, out)
}
