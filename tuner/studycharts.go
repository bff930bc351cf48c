package tuner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// The study charts of the dashboard: what the search did over time, which
// flags mattered, and every trial across the searched flags.

// trialValue is a trial's throughput when it was measured and met slo
// (NaN otherwise).
func trialValue(t store.Trial, slo trial.SLO, m Metrics) float64 {
	if t.Result == nil || !t.Result.Usable() {
		return math.NaN()
	}
	v, ok := t.Result.Objective(m.Throughput)
	if !ok {
		return math.NaN()
	}
	if mm := t.Result.Metrics(); mm != nil {
		if ok, _ := slo.Check(mm); !ok {
			return math.NaN()
		}
	}
	return v
}

// ProgressChart is the optimisation history of a study: the best feasible
// throughput against the trial number and against the GPU-hours spent
// (each trial's duration times the study's GPUs per engine).
func ProgressChart(st store.Study, trials []store.Trial, slo trial.SLO, m Metrics) chart.Figure {
	gpus := float64(max(st.Key.GPUCount, 1))
	hours := 0.0
	var pts []chart.ProgressTrial
	for _, t := range trials {
		if t.State == store.StateRunning {
			continue
		}
		if !t.Ended.IsZero() && t.Ended.After(t.Started) {
			hours += t.Ended.Sub(t.Started).Hours() * gpus
		}
		pts = append(pts, chart.ProgressTrial{Number: int(t.Seq), ID: t.ID, GPUHours: hours, Value: trialValue(t, slo, m)})
	}
	return chart.Progress(ChartTitle(st.Key), m.Throughput, pts)
}

// MinImportanceTrials is the fewest measured trials importance is computed
// from: below it a model of the study says nothing.
const MinImportanceTrials = 8

// ImportanceMethod names how importance is measured.
const ImportanceMethod = "permutation importance on the search's surrogate (gradient-boosted trees trained on this study): " +
	"the growth of its squared error on the measured trials when one flag's values are shuffled, over the variance of the throughput"

// ImportanceChart is the importance of each searched flag for the study's
// throughput, or why it cannot be computed (reason != "").
func ImportanceChart(st store.Study, trials []store.Trial, m Metrics, seed uint64) (fig chart.Figure, reason string) {
	sp, err := spaces.Default()
	if err != nil {
		return fig, err.Error()
	}
	var samples []surrogate.Sample
	var rows []spaces.Config
	var y []float64
	for _, t := range trials {
		if t.Result == nil || t.Result.Failure == trial.FailInterrupted || t.State == store.StateRunning {
			continue
		}
		samples = append(samples, surrogate.Sample{Config: t.Config, Result: t.Result})
		if v, ok := t.Result.Objective(m.Throughput); ok && t.Result.Usable() {
			rows, y = append(rows, t.Config), append(y, v)
		}
	}
	if len(y) < MinImportanceTrials {
		return fig, fmt.Sprintf("needs at least %d measured trials; this study has %d", MinImportanceTrials, len(y))
	}
	searched := searchedFlags(trials)
	if len(searched) == 0 {
		return fig, "every trial ran the same flags: nothing was searched"
	}
	schema := surrogate.NewSchema(sp)
	opts := surrogate.DefaultOptions()
	opts.Objectives = []surrogate.Objective{surrogate.ObjectiveFor(m.Throughput)}
	model, err := surrogate.Train(schema, samples, opts)
	if err != nil {
		return fig, fmt.Sprintf("the surrogate could not be trained: %v", err)
	}
	enc := schema.EncoderFor(surrogate.Context{})
	x := enc.EncodeAll(rows)
	var groups [][]int
	var names []string
	for _, name := range searched {
		var cols []int
		for i, f := range schema.Features {
			if f.Source == "param:"+name {
				cols = append(cols, i)
			}
		}
		if len(cols) > 0 {
			groups, names = append(groups, cols), append(names, name)
		}
	}
	if len(groups) == 0 {
		return fig, "the searched flags are not in the default space the surrogate encodes"
	}
	imp := model.PermutationImportance(x, y, model.ObjectiveIndex(m.Throughput), groups, 5, rand.New(rand.NewPCG(seed, 1)))
	bars := make([]chart.ImportanceBar, len(names))
	for i, n := range names {
		bars[i] = chart.ImportanceBar{Flag: "--" + strings.ReplaceAll(n, "_", "-"), Value: imp[i]}
	}
	return chart.Importance(ChartTitle(st.Key), fmt.Sprintf("%s; %d measured trials", "permutation importance on the search's surrogate", len(y)), bars), ""
}

// searchedFlags are the parameters whose value differs between trials.
func searchedFlags(trials []store.Trial) []string {
	seen := map[string]spaces.Value{}
	varied := map[string]bool{}
	for _, t := range trials {
		for _, n := range t.Config.Names() {
			v, _ := t.Config.Get(n)
			if old, ok := seen[n]; ok && !old.Equal(v) {
				varied[n] = true
			}
			seen[n] = v
		}
	}
	var out []string
	for n := range varied {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// ParallelChart draws every finished trial across the searched flags and
// its throughput (0 when failed or infeasible, drawn grey).
func ParallelChart(st store.Study, trials []store.Trial, slo trial.SLO, m Metrics) chart.Figure {
	flags := searchedFlags(trials)
	pc := chart.Parallel{ColourName: m.Throughput}
	cats := map[string][]string{}
	for _, n := range flags {
		numeric := true
		var choices []string
		for _, t := range trials {
			v, ok := t.Config.Get(n)
			if !ok {
				continue
			}
			if v.Kind() == spaces.Bool || v.Kind() == spaces.Categorical {
				numeric = false
			}
			if !slices.Contains(choices, v.String()) {
				choices = append(choices, v.String())
			}
		}
		d := chart.Dim{Name: n}
		if !numeric {
			slices.Sort(choices)
			d.Categories, cats[n] = choices, choices
		}
		pc.Dims = append(pc.Dims, d)
	}
	pc.Dims = append(pc.Dims, chart.Dim{Name: m.Throughput + " (" + chart.Unit(m.Throughput) + ")"})
	for _, t := range trials {
		if t.State == store.StateRunning {
			continue
		}
		r := chart.Row{Name: t.ID, Colour: trialValue(t, slo, m)}
		for _, n := range flags {
			v, _ := t.Config.Get(n)
			if c, ok := cats[n]; ok {
				r.Values = append(r.Values, float64(slices.Index(c, v.String())))
			} else {
				r.Values = append(r.Values, v.Float())
			}
		}
		tp := r.Colour
		if math.IsNaN(tp) {
			tp = 0
		}
		r.Values = append(r.Values, tp)
		r.Tip = fmt.Sprintf("trial %d (%s): %s\n%s %.1f", t.Seq, t.Verdict(), strings.Join(t.Config.Flags(), " "), m.Throughput, tp)
		pc.Rows = append(pc.Rows, r)
	}
	return chart.ParallelCoordinates(ChartTitle(st.Key), pc)
}
