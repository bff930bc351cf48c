package tuner

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/vllm-tuner/tuner/chart"
)

// releaseRow is one table row: a model's cell now and before.
type releaseRow struct {
	Model, Cell, Engine, Runs, Verdict string
	Capacity, Output, TTFT, TPOT       string
}

func (r *ReleaseReport) rows() []releaseRow {
	var out []releaseRow
	for _, m := range r.Models {
		engine, runs := cmp.Or(m.EngineVersion, "-"), m.Run
		if m.PrevRun != "" {
			runs = m.Run + " vs " + m.PrevRun
			if m.PrevEngineVersion != m.EngineVersion {
				engine = cmp.Or(m.EngineVersion, "-") + " (was " + cmp.Or(m.PrevEngineVersion, "-") + ")"
			}
		}
		verdict := m.Verdict
		if m.Regressions > 0 {
			verdict = fmt.Sprintf("%s (%d rows)", m.Verdict, m.Regressions)
		}
		for _, c := range m.Cells {
			row := releaseRow{Model: m.Model + " on " + fmt.Sprintf("%dx %s", max(1, m.GPUCount), m.GPU), Cell: c.Name, Engine: engine, Runs: runs, Verdict: verdict}
			var p ReleaseFigures
			if c.Prev != nil {
				p = *c.Prev
			}
			has := c.Prev != nil
			capText := fmt.Sprintf("%.4g %s", c.Now.Capacity, c.Now.LoadUnit)
			if !c.Now.SLOMet {
				capText = "SLO not met"
			}
			row.Capacity = sideBySide(capText, fmt.Sprintf("%.4g", p.Capacity), has && p.SLOMet, c.Now.Capacity, p.Capacity)
			row.Output = sideBySide(fmt.Sprintf("%.1f", c.Now.OutputTokS), fmt.Sprintf("%.1f", p.OutputTokS), has, c.Now.OutputTokS, p.OutputTokS)
			row.TTFT = sideBySide(fmt.Sprintf("%.1f", c.Now.TTFTP99MS), fmt.Sprintf("%.1f", p.TTFTP99MS), has, c.Now.TTFTP99MS, p.TTFTP99MS)
			row.TPOT = sideBySide(fmt.Sprintf("%.2f", c.Now.TPOTP99MS), fmt.Sprintf("%.2f", p.TPOTP99MS), has, c.Now.TPOTP99MS, p.TPOTP99MS)
			out = append(out, row)
		}
	}
	return out
}

// sideBySide is "now (was before, +x%)".
func sideBySide(now, before string, has bool, a, b float64) string {
	if !has {
		return now
	}
	if b == 0 {
		return fmt.Sprintf("%s (was %s)", now, before)
	}
	return fmt.Sprintf("%s (was %s, %+.1f%%)", now, before, 100*(a-b)/b)
}

var releaseHead = []string{"model", "cell", "vLLM", "runs", "capacity at SLO", "output tok/s at capacity", "TTFT p99 ms", "TPOT p99 ms", "gate"}

// WriteMarkdown writes the report as Markdown (a release note, a PR comment).
func (r *ReleaseReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s report\n\n", r.Tier)
	fmt.Fprintf(&b, "Each model's newest %s run against its previous one; figures at capacity (the highest load meeting the SLO); gate: the regression test on the per-request samples.\n\n", r.Tier)
	b.WriteString("| " + strings.Join(releaseHead, " | ") + " |\n|" + strings.Repeat("---|", len(releaseHead)) + "\n")
	for _, row := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Model, row.Cell, row.Engine, row.Runs, row.Capacity, row.Output, row.TTFT, row.TPOT, row.Verdict)
	}
	for _, m := range r.Models {
		if m.Reason != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", m.Model, m.Reason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Figure is output tokens/s at capacity per model and cell, this release
// beside the previous one.
func (r *ReleaseReport) Figure() chart.Figure {
	var cats []string
	now := chart.Series{Name: "this release", Kind: chart.Bar, Colour: chart.Cycle(0)}
	prev := chart.Series{Name: "previous release", Kind: chart.Bar, Colour: chart.Cycle(1)}
	for _, m := range r.Models {
		for _, c := range m.Cells {
			i := len(cats)
			cats = append(cats, m.Model+" "+c.Name)
			now.Points = append(now.Points, chart.Point{Cat: i, Y: c.Now.OutputTokS, Tip: fmt.Sprintf("%s %s %s: %.1f tok/s", m.Model, c.Name, m.Run, c.Now.OutputTokS)})
			p := chart.Point{Cat: i, Missing: c.Prev == nil}
			if c.Prev != nil {
				p.Y, p.Tip = c.Prev.OutputTokS, fmt.Sprintf("%s %s %s: %.1f tok/s", m.Model, c.Name, m.PrevRun, c.Prev.OutputTokS)
			}
			prev.Points = append(prev.Points, p)
		}
	}
	return chart.Figure{Title: r.Tier + ": output tokens/s at capacity", Page: r.Tier + " report",
		Panels: []chart.Panel{{X: chart.Axis{Name: "model and cell", Categories: cats}, Y: chart.Axis{Name: "output throughput", Unit: "tok/s", Zero: true},
			Series: []chart.Series{now, prev}}}}
}

var releasePage = template.Must(template.New("release").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Tier}} report</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}
td.regression{background:#fdd}td.pass{background:#dfd}td.inconclusive{background:#ffd}iframe{border:0;width:100%;height:420px}</style></head>
<body><h1>{{.Tier}} report</h1>
<p>Each model's newest {{.Tier}} run against its previous one; figures at capacity (the highest load meeting the SLO); gate: the regression test on the per-request samples. Generated {{.Generated.Format "2006-01-02 15:04 MST"}}.</p>
<table><thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Model}}</td><td>{{.Cell}}</td><td>{{.Engine}}</td><td>{{.Runs}}</td><td>{{.Capacity}}</td><td>{{.Output}}</td><td>{{.TTFT}}</td><td>{{.TPOT}}</td><td class="{{.Class}}">{{.Verdict}}</td></tr>
{{end}}</tbody></table>
{{range .Reasons}}<p>{{.}}</p>{{end}}
<iframe title="output tokens/s at capacity" srcdoc="{{.Chart}}"></iframe>
</body></html>
`))

// WriteHTML writes the report as one offline page: the table, and the
// chart package's interactive bar chart in a frame of its own (ECharts
// inlined; nothing is fetched).
func (r *ReleaseReport) WriteHTML(w io.Writer) error {
	var fig bytes.Buffer
	if err := chart.WriteHTML(&fig, r.Figure()); err != nil {
		return err
	}
	type row struct {
		releaseRow
		Class string
	}
	data := struct {
		*ReleaseReport
		Head    []string
		Rows    []row
		Reasons []string
		Chart   string
	}{ReleaseReport: r, Head: releaseHead, Chart: fig.String()}
	for _, rr := range r.rows() {
		class, _, _ := strings.Cut(rr.Verdict, " (")
		data.Rows = append(data.Rows, row{rr, class})
	}
	for _, m := range r.Models {
		if m.Reason != "" {
			data.Reasons = append(data.Reasons, m.Model+": "+m.Reason)
		}
	}
	return releasePage.Execute(w, data)
}
