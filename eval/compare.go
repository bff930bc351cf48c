package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/stats"
)

// PairedRow compares one figure of one strategy between two reports, seed
// by seed (Compare). Scenario is empty on the row that pools every
// scenario's seeds.
type PairedRow struct {
	Scenario string `json:"scenario,omitempty"`
	Strategy string `json:"strategy"`
	Figure   string `json:"figure"` // "HV@8", "HV@24", ..., "pick"
	// BaseMedian and NewMedian are the figure's medians over the paired
	// seeds (the search table's figure).
	BaseMedian float64 `json:"base_median"`
	NewMedian  float64 `json:"new_median"`
	stats.PairedResult
}

// Compare pairs the runs of two reports seed by seed: for every scenario
// and strategy in both, every HV checkpoint both measured and the pick,
// the new seed's figure minus the base's (stats.Paired), then each figure
// over all scenarios' seeds. A change to the search is judged by these
// differences, not by the difference of the two medians: a scenario's
// seeds spread over 0.6-0.96 in HV@24, and runs on the same seeds share
// their openings' luck, so the paired mean has the power the medians lack
// (README, "Judging a change seed by seed").
func Compare(base, cur *Report) ([]PairedRow, error) {
	type key struct{ scen, strat string }
	bySum := map[key]*Summary{}
	for i := range base.Summaries {
		s := &base.Summaries[i]
		bySum[key{s.Scenario, s.Strategy}] = s
	}
	figures := []string{}
	for _, cp := range cur.Settings.Checkpoints {
		if slices.Contains(base.Settings.Checkpoints, cp) {
			figures = append(figures, "HV@"+ck(cp))
		}
	}
	figures = append(figures, "pick")
	type pool struct{ x, y []float64 }
	type poolKey struct{ strat, fig string }
	pooled := map[poolKey]*pool{}
	var rows []PairedRow
	var strategies []string
	for i := range cur.Summaries {
		s := &cur.Summaries[i]
		b, ok := bySum[key{s.Scenario, s.Strategy}]
		if !ok {
			continue
		}
		if len(s.Seeds) == 0 || len(b.Seeds) == 0 {
			return nil, fmt.Errorf("%w: %s/%s has no per-seed figures (a report written before tuner eval compare existed; run it again)", ErrConfig, s.Scenario, s.Strategy)
		}
		if !slices.Contains(strategies, s.Strategy) {
			strategies = append(strategies, s.Strategy)
		}
		pairs := pairSeeds(b.Seeds, s.Seeds)
		for _, fig := range figures {
			x, y := figureOf(pairs, fig)
			if len(x) < 2 {
				continue
			}
			r, err := pairedRow(s.Scenario, s.Strategy, fig, x, y)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
			p := pooled[poolKey{s.Strategy, fig}]
			if p == nil {
				p = &pool{}
				pooled[poolKey{s.Strategy, fig}] = p
			}
			p.x, p.y = append(p.x, x...), append(p.y, y...)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: the reports share no scenario and strategy with two or more seeds in both", ErrConfig)
	}
	for _, st := range strategies {
		for _, fig := range figures {
			p := pooled[poolKey{st, fig}]
			if p == nil {
				continue
			}
			r, err := pairedRow("", st, fig, p.x, p.y)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// pairedRow compares one figure's paired values (scen "": all scenarios).
func pairedRow(scen, strat, fig string, x, y []float64) (PairedRow, error) {
	r, err := stats.Paired(x, y)
	if err != nil {
		where := scen
		if where == "" {
			where = "all scenarios"
		}
		return PairedRow{}, fmt.Errorf("%s, %s, %s: %w", where, strat, fig, err)
	}
	return PairedRow{Scenario: scen, Strategy: strat, Figure: fig, BaseMedian: quantiles(x).Median,
		NewMedian: quantiles(y).Median, PairedResult: r}, nil
}

// pairSeeds returns the seeds both runs have, base's and the new run's
// figures side by side, in the new run's order (seed order).
func pairSeeds(base, cur []SeedFigures) [][2]SeedFigures {
	bySeed := make(map[uint64]SeedFigures, len(base))
	for _, f := range base {
		bySeed[f.Seed] = f
	}
	var out [][2]SeedFigures
	for _, f := range cur {
		if bf, ok := bySeed[f.Seed]; ok {
			out = append(out, [2]SeedFigures{bf, f})
		}
	}
	return out
}

// figureOf returns one figure of the paired seeds that have it in both runs.
func figureOf(pairs [][2]SeedFigures, fig string) (x, y []float64) {
	get := func(f SeedFigures) (float64, bool) {
		if fig == "pick" {
			if f.Pick == nil {
				return 0, false
			}
			return *f.Pick, true
		}
		v, ok := f.HV[strings.TrimPrefix(fig, "HV@")]
		return v, ok
	}
	for _, p := range pairs {
		bv, ok1 := get(p[0])
		cv, ok2 := get(p[1])
		if ok1 && ok2 {
			x, y = append(x, bv), append(y, cv)
		}
	}
	return x, y
}

// CompareMarkdown renders Compare's rows: per strategy and figure, the row
// over all scenarios first, then each scenario's.
func CompareMarkdown(rows []PairedRow) string {
	var b strings.Builder
	b.WriteString("| strategy | figure | scenario | seeds | base median | new median | mean new - base | p | new better / worse |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	type sf struct{ strat, fig string }
	var groups []sf
	for _, r := range rows {
		if g := (sf{r.Strategy, r.Figure}); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		for _, r := range rows {
			if r.Strategy == g.strat && r.Figure == g.fig && r.Scenario == "" {
				writeRow(&b, r, "**all**")
			}
		}
		for _, r := range rows {
			if r.Strategy == g.strat && r.Figure == g.fig && r.Scenario != "" {
				writeRow(&b, r, r.Scenario)
			}
		}
	}
	return b.String()
}

func writeRow(b *strings.Builder, r PairedRow, scen string) {
	fmt.Fprintf(b, "| %s | %s | %s | %d | %.3f | %.3f | %+.4f ± %.4f | %.3g | %d / %d |\n",
		r.Strategy, r.Figure, scen, r.N, r.BaseMedian, r.NewMedian, r.Mean, r.SE, r.P, r.Wins, r.Losses)
}

// ReadReport reads a report.json, or the one in a report directory.
func ReadReport(path string) (*Report, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "report.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return parseReport(path, b)
}

// parseReport decodes a report.json read from path.
func parseReport(path string, b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: not an eval report: %w", ErrConfig, path, err)
	}
	if len(r.Summaries) == 0 {
		return nil, fmt.Errorf("%w: %s: an eval report without summaries", ErrConfig, path)
	}
	return &r, nil
}
