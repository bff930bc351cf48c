package eval

import (
	"fmt"
	"os"
	"strings"
)

// SearchTable is the README's search table: per scenario and strategy the
// median HV ratio at the first and last checkpoints (against the fixed
// truth), GPU hours to GPUThresholds, and the truth check; with the seeds,
// trials and wall time it came from; and each goal with the scenarios that
// meet it.
func (r *Report) SearchTable() string {
	var b strings.Builder
	st := r.Settings
	first, last := st.Checkpoints[0], st.Checkpoints[len(st.Checkpoints)-1]
	for _, k := range st.Checkpoints {
		if k == 8 {
			first = k
		}
		if k == 24 {
			last = k
		}
	}
	fmt.Fprintf(&b, "Seeds 1-%d, %d trials per run, strategies %s; fixed ground truth (eval/testdata, optimised to convergence, at most %d polish evaluations); wall time %.0f s.\n\n",
		st.Seeds, st.Trials, strings.Join(st.Strategies, ", "), st.Plan.Polish, r.WallS)
	fmt.Fprintf(&b, "| scenario | strategy | HV@%d | HV@%d | GPU h to %.2f (seeds) | GPU h to %.2f (seeds) |\n|---|---|---|---|---|---|\n",
		first, last, GPUThresholds[0], GPUThresholds[1])
	for _, s := range r.Summaries {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.Scenario, s.Strategy, fmtQ(s.HV[ck(first)], 3), fmtQ(s.HV[ck(last)], 3),
			fmtReached(s, GPUThresholds[0], st.Seeds), fmtReached(s, GPUThresholds[1], st.Seeds))
	}
	fmt.Fprintf(&b, "\n| scenario | truth front | truth+runs / truth (run configs on the joined front) | polish evaluations (converged) |\n|---|---|---|---|\n")
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, "| %s | %d | %.4f (%d) | %d (%v) |\n", sc.Name, sc.Front, sc.JoinedHV, sc.FromRuns, sc.Polished, sc.Converged)
	}
	if len(r.Goals) > 0 {
		fmt.Fprintf(&b, "\n| goal | met | per scenario |\n|---|---|---|\n")
		for _, g := range goalGroups(r.Goals) {
			met := 0
			var vals []string
			for _, x := range g {
				v, _, _ := strings.Cut(x.Value, ";") // the headline figure
				mark := "no"
				if x.Met {
					met, mark = met+1, "yes"
				}
				vals = append(vals, fmt.Sprintf("%s %s (%s)", x.Scenario, v, mark))
			}
			fmt.Fprintf(&b, "| %s | %d of %d | %s |\n", g[0].Goal, met, len(g), strings.Join(vals, ", "))
		}
	}
	return b.String()
}

// goalGroups groups goals by their text, in order of first appearance.
func goalGroups(gs []Goal) [][]Goal {
	var out [][]Goal
	at := map[string]int{}
	for _, g := range gs {
		i, ok := at[g.Goal]
		if !ok {
			i = len(out)
			at[g.Goal] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], g)
	}
	return out
}

// Markers of the README's search table (ReplaceTable): the default block's
// name is SearchTableName, another `tuner eval search` run (the held-out
// scenarios') writes a block of its own name beside it.
const (
	SearchTableName = "search-table"
	TableBegin      = "<!-- " + SearchTableName + ":begin (make eval-search-table) -->"
	TableEnd        = "<!-- " + SearchTableName + ":end -->"
)

// ReplaceTable writes table into file's block name: between the line that
// opens with "<!-- name:begin" (the rest of that line, such as the command
// that writes it, is kept) and "<!-- name:end -->".
func ReplaceTable(file, name, table string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	i, j, err := tableBlock(file, string(b), name)
	if err != nil {
		return err
	}
	return os.WriteFile(file, []byte(string(b[:i])+table+string(b[j:])), 0o644)
}

// CheckTable says whether file has the block name that ReplaceTable
// writes: checked before a run of many minutes, not after it.
func CheckTable(file, name string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	_, _, err = tableBlock(file, string(b), name)
	return err
}

// tableBlock is where block name's contents sit in s: from the line after
// its begin marker to its end marker.
func tableBlock(file, s, name string) (int, int, error) {
	begin, end := "<!-- "+name+":begin", "<!-- "+name+":end -->"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return 0, 0, fmt.Errorf("%s: no %s ... %s block", file, begin, end)
	}
	nl := strings.IndexByte(s[i:j], '\n')
	if nl < 0 {
		return 0, 0, fmt.Errorf("%s: %s block: the begin marker has no line of its own", file, name)
	}
	return i + nl + 1, j, nil
}
