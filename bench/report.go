package bench

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// table is a header and rows, rendered as aligned text or Markdown.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) text(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.head, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

func (t *table) markdown(w io.Writer) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(t.head, " | "), strings.Repeat("---|", len(t.head)))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// WriteRun renders the run as text ("text") or Markdown ("md"): the labels,
// then per cell its throughput table, its latency percentiles, the
// prompt-length buckets and the capacity at the SLO.
func WriteRun(w io.Writer, r *store.Run, format string) error {
	md := format == "md"
	render := func(t *table) {
		if md {
			t.markdown(w)
		} else {
			t.text(w)
		}
		fmt.Fprintln(w)
	}
	if md {
		fmt.Fprintf(w, "### Benchmark run %s (%s)\n\n", r.ID, r.State)
	} else {
		fmt.Fprintf(w, "run %s  %s\n", r.ID, r.State)
	}
	lab := &table{head: []string{"label", "value"}}
	lab.add("model", r.Model)
	gpu := "-"
	if r.GPU.Name != "" {
		gpu = fmt.Sprintf("%d x %s", max(1, r.GPU.Count), r.GPU.Name)
	}
	lab.add("gpu", gpu)
	lab.add("engine", strings.TrimSpace(r.Engine+" "+r.EngineVersion))
	if r.URL != "" {
		lab.add("url", r.URL)
	}
	lab.add("matrix", fmt.Sprintf("%s (%s)", r.Matrix, r.MatrixHash))
	if r.Tier != "" {
		lab.add("tier", r.Tier)
	}
	// An imported run's labels often repeat what the rows above show
	// (vllm bench --metadata gpu=...): a label fills a row left "-", says
	// nothing when the row already holds its value, and is named as a label
	// when it disagrees.
	shown := map[string]int{}
	for i, row := range lab.rows {
		shown[row[0]] = i
	}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		v := r.Labels[k]
		i, ok := shown[k]
		switch {
		case !ok:
			lab.add(k, v)
		case lab.rows[i][1] == "-" || lab.rows[i][1] == "":
			lab.rows[i][1] = v
		case !strings.Contains(lab.rows[i][1], v):
			lab.add(k+" (label)", v)
		}
	}
	lab.add("start", r.Start.Format(time.RFC3339))
	if !r.End.IsZero() {
		lab.add("end", fmt.Sprintf("%s (%s)", r.End.Format(time.RFC3339), r.End.Sub(r.Start).Round(time.Second)))
	}
	if r.Reason != "" {
		lab.add("reason", r.Reason)
	}
	if len(r.Flags) > 0 {
		flags := strings.Join(r.Flags, " ")
		if md {
			flags = "`" + flags + "`"
		}
		lab.add("command", flags)
	}
	render(lab)
	for i := range r.Cells {
		c := &r.Cells[i]
		title := fmt.Sprintf("cell %s: %d requests", c.Name, c.Requests)
		if c.Workload.SLO != nil {
			title += fmt.Sprintf(", SLO %s, capacity at SLO %g", c.Workload.SLO, c.Capacity)
		}
		if c.Error != "" {
			title += ", stopped: " + c.Error
		}
		if md {
			fmt.Fprintf(w, "#### %s\n\n", title)
		} else {
			fmt.Fprintln(w, title)
		}
		render(throughputTable(c))
		if t := peakTable(c); len(t.rows) > 0 {
			render(t)
		}
		render(latencyTable(c))
		if fb := c.Feedback; fb != nil {
			fmt.Fprintf(w, "%s\n\n", fb.Summary())
			render(&table{head: trial.FeedbackHeader, rows: fb.Rows()})
		}
		if t := breakdownTable(c); len(t.rows) > 0 {
			render(t)
		}
		render(bucketTable(c))
		if t := tenantTable(c); len(t.rows) > 0 {
			render(t)
		}
	}
	return nil
}

// tenantTable holds a LoRA workload's per-tenant figures and, per load,
// the fairness between tenants (worst over best P95).
func tenantTable(c *store.CellResult) *table {
	t := &table{head: []string{"load", "tenant", "requests", "out tok/s", "ttft p50", "ttft p95", "tpot p95", "e2el p95", "fairness e2el p95"}}
	for i := range c.Levels {
		l := &c.Levels[i]
		fair := "-"
		if f := l.Metrics.Fairness; f != nil {
			fair = fmt.Sprintf("%.2fx (worst %s)", f.E2ELP95Ratio, f.Worst)
		}
		for _, n := range l.Metrics.Tenants() {
			m := l.Metrics.ByTenant[n]
			t.add(l.LoadString(), n, strconv.Itoa(m.Completed+m.Failed), f1(m.OutputThroughput), f2(m.TTFT.Median), f2(m.TTFT.P95), f2(m.TPOT.P95), f2(m.E2EL.P95), fair)
		}
	}
	return t
}

func throughputTable(c *store.CellResult) *table {
	t := &table{head: []string{"load", "req/s", "in tok/s", "out tok/s", "total tok/s", "goodput req/s", "success", "errors", "stable", "kv max", "preempt", "prefix hit", "out tok/s/gpu", "J/tok"}}
	for i := range c.Levels {
		l := &c.Levels[i]
		m := &l.Metrics
		// Input tokens over the same window as the other columns: total
		// minus output (the input token count over the level's own span
		// read 5x the total on a steady window).
		in := max(0, m.TotalTokenThroughput-m.OutputThroughput)
		var errs []string
		for _, k := range slices.Sorted(maps.Keys(l.Errors)) {
			errs = append(errs, fmt.Sprintf("%s:%d", k, l.Errors[k]))
		}
		stable := "yes"
		if !l.Stability.Stable {
			stable = "no"
		}
		j := "-"
		if l.JoulesPerToken > 0 {
			j = f2(l.JoulesPerToken)
		}
		hit := "-" // no prefix-cache lookups in the window (or no counters)
		if p := m.PrefixCache; p != nil {
			hit = fmt.Sprintf("%.1f%%", 100*p.HitRate)
		}
		per := "-"
		if l.OutputTokSPerGPU > 0 {
			per = f1(l.OutputTokSPerGPU)
		}
		t.add(l.LoadString(), f2(m.RequestThroughput), f1(in), f1(m.OutputThroughput), f1(m.TotalTokenThroughput), orNA(m, "request_goodput", m.RequestGoodput),
			fmt.Sprintf("%.1f%%", 100*l.SuccessRate), cmp.Or(strings.Join(errs, " "), "-"), stable,
			fmt.Sprintf("%.0f%%", 100*l.Telemetry.MaxKVCacheUsage), fmt.Sprintf("%.0f", l.Telemetry.Preemptions), hit, per, j)
	}
	return t
}

// peakTable holds the peaks vLLM bench reports (imported results): output
// tokens in its busiest second, the most requests in flight at once, and
// the time requests waited in the client for a --max-concurrency slot; no
// rows when no level has them.
func peakTable(c *store.CellResult) *table {
	t := &table{head: []string{"load", "peak out tok/s", "peak concurrency", "client queue ms mean", "p50", "p99", "max"}}
	for i := range c.Levels {
		l := &c.Levels[i]
		if l.PeakOutputThroughput <= 0 && l.PeakConcurrency <= 0 && l.ClientQueue == nil {
			continue
		}
		peak, conc := "n/a", "n/a"
		if l.PeakOutputThroughput > 0 {
			peak = f1(l.PeakOutputThroughput)
		}
		if l.PeakConcurrency > 0 {
			conc = strconv.Itoa(l.PeakConcurrency)
		}
		q := []string{"n/a", "n/a", "n/a", "n/a"}
		if d := l.ClientQueue; d != nil {
			q = []string{f2(d.Mean), f2(d.Median), f2(d.P99), f2(d.Max)}
		}
		t.add(append([]string{l.LoadString(), peak, conc}, q...)...)
	}
	return t
}

// orNA formats a figure with two decimals, or "n/a" when the level's
// source did not have it (Metrics.Missing).
func orNA(m *trial.Metrics, name string, v float64) string {
	if m.Lacks(name) {
		return "n/a"
	}
	return f2(v)
}

func latencyTable(c *store.CellResult) *table {
	t := &table{head: []string{"load", "metric (ms)", "mean", "p50", "p90", "p95", "p99", "max"}}
	for i := range c.Levels {
		l := &c.Levels[i]
		for _, md := range []struct {
			name string
			d    trial.Dist
		}{{"ttft", l.Metrics.TTFT}, {"tpot", l.Metrics.TPOT}, {"itl", l.Metrics.ITL}, {"e2el", l.Metrics.E2EL}} {
			d, m := md.d, &l.Metrics
			t.add(l.LoadString(), md.name, orNA(m, md.name+"_mean", d.Mean), orNA(m, md.name+"_p50", d.Median), orNA(m, md.name+"_p90", d.P90),
				orNA(m, md.name+"_p95", d.P95), orNA(m, md.name+"_p99", d.P99), orNA(m, md.name+"_max", d.Max))
		}
	}
	return t
}

// breakdownTable is where each level's request time went: the engine's
// queue, prefill and decode means (from its histograms) and the client's
// share, with their shares of the parts' sum and the phases' approximate
// p95, beside the client's TTFT and TPOT means.
func breakdownTable(c *store.CellResult) *table {
	t := &table{head: []string{"load", "queue ms", "prefill ms", "decode ms", "client ms", "e2el mean", "shares q/p/d/c", "p95 q/p/d ~", "ttft mean", "tpot mean", "requests (engine)"}}
	pct := func(v float64) string { return strconv.FormatFloat(100*v, 'f', 0, 64) }
	for i := range c.Levels {
		l := &c.Levels[i]
		b := l.Metrics.Breakdown
		if b == nil {
			continue
		}
		s := b.Shares()
		t.add(l.LoadString(), f1(b.Queue.Mean), f1(b.Prefill.Mean), f1(b.Decode.Mean), f1(b.ClientMS), f1(b.ClientE2ELMS),
			pct(s[0])+"/"+pct(s[1])+"/"+pct(s[2])+"/"+pct(s[3])+"%",
			b.Queue.Pct(b.Queue.P95)+"/"+b.Prefill.Pct(b.Prefill.P95)+"/"+b.Decode.Pct(b.Decode.P95), f1(b.ClientTTFTMS), f2(b.ClientTPOTMS),
			fmt.Sprintf("%d (%d)", b.ClientRequests, b.EngineRequests))
	}
	return t
}

// Buckets are the prompt-length classes in display order.
var bucketOrder = []string{"short", "medium", "long"}

func bucketTable(c *store.CellResult) *table {
	b := trial.DefaultPromptBuckets()
	t := &table{head: []string{"load", fmt.Sprintf("prompt bucket (<%d / %d-%d / >%d)", b.Short, b.Short, b.Medium, b.Medium), "requests", "out tok/s", "ttft p50", "ttft p99", "tpot p50", "tpot p99", "e2el p50"}}
	for i := range c.Levels {
		l := &c.Levels[i]
		for _, k := range bucketOrder {
			m := l.Metrics.ByClass[k]
			if m == nil {
				continue
			}
			t.add(l.LoadString(), k, strconv.Itoa(m.Completed+m.Failed), f1(m.OutputThroughput), f2(m.TTFT.Median), f2(m.TTFT.P99), f2(m.TPOT.Median), f2(m.TPOT.P99), f2(m.E2EL.Median))
		}
	}
	return t
}

// CSVHeader are the columns of WriteCSV.
var CSVHeader = []string{"run", "cell", "level", "load", "request", "start_ms", "prompt_tokens", "output_tokens",
	"ttft_ms", "tpot_ms", "e2el_ms", "itl_mean_ms", "itl_p50_ms", "itl_p99_ms", "itl_max_ms", "warmup", "error"}

// CSVWriter writes raw requests as CSV rows (header first).
type CSVWriter struct {
	w      *csv.Writer
	header bool
}

// NewCSVWriter returns a writer of CSVHeader rows on w.
func NewCSVWriter(w io.Writer) *CSVWriter { return &CSVWriter{w: csv.NewWriter(w)} }

// Write writes the requests of one cell of run.
func (cw *CSVWriter) Write(run string, c *store.CellResult, reqs []Request) error {
	if !cw.header {
		cw.header = true
		if err := cw.w.Write(CSVHeader); err != nil {
			return err
		}
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(msOf(d), 'f', 3, 64) }
	row := make([]string, len(CSVHeader))
	for i := range reqs {
		r := &reqs[i]
		load := ""
		if r.Level < len(c.Levels) {
			load = c.Levels[r.Level].LoadString()
		}
		tpot := ""
		if d, ok := r.TPOT(); ok {
			tpot = ms(d)
		}
		row = append(row[:0], run, c.Name, strconv.Itoa(r.Level), load, strconv.Itoa(r.Index), ms(r.Start),
			strconv.Itoa(r.Prompt), strconv.Itoa(r.Output))
		if r.OK() {
			row = append(row, ms(r.TTFT), tpot, ms(r.E2EL), ms(r.ITL.Mean), ms(r.ITL.P50), ms(r.ITL.P99), ms(r.ITL.Max))
		} else {
			row = append(row, "", "", ms(r.E2EL), "", "", "", "")
		}
		row = append(row, strconv.FormatBool(r.Warmup), r.Err)
		if err := cw.w.Write(row); err != nil {
			return err
		}
	}
	cw.w.Flush()
	return cw.w.Error()
}

// Flush flushes the CSV writer.
func (cw *CSVWriter) Flush() error {
	cw.w.Flush()
	return cw.w.Error()
}

// ListTable writes one line per run: ID, state, model, GPU, engine,
// matrix, tier, labels, start, cells.
func ListTable(w io.Writer, runs []store.Run) {
	t := &table{head: []string{"RUN", "STATE", "SOURCE", "MODEL", "GPU", "ENGINE", "MATRIX", "TIER", "LABELS", "START", "CELLS"}}
	for i := range runs {
		r := &runs[i]
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			labels = append(labels, k+"="+r.Labels[k])
		}
		gpu := "-"
		if r.GPU.Name != "" {
			gpu = fmt.Sprintf("%dx%s", max(1, r.GPU.Count), r.GPU.Name)
		}
		t.add(r.ID, string(r.State), r.Source, cmp.Or(r.Model, "-"), gpu, cmp.Or(strings.TrimSpace(r.Engine+" "+r.EngineVersion), "-"),
			cmp.Or(r.Matrix, "-"), cmp.Or(r.Tier, "-"), cmp.Or(strings.Join(labels, ","), "-"), r.Start.Format("2006-01-02 15:04"), strconv.Itoa(len(r.Cells)))
	}
	t.text(w)
}
