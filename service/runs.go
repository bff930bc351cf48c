package service

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// benchRoutes adds the benchmark runs and the regression gate to the API.
func (s *Server) benchRoutes(read func(string, http.HandlerFunc)) {
	read("GET /api/v1/runs", (s.listRuns))
	read("GET /api/v1/runs/{id}", (s.getRun))
	read("GET /api/v1/runs/{id}/raw", (s.runRaw))
	read("GET /api/v1/runs/{id}/plot", (s.runPlot))
	read("GET /api/v1/compare", (s.compare))
}

// writeBenchErr maps the benchmark and gate errors: a missing run 404,
// runs the gate cannot judge 422, the rest as writeErr does.
func (s *Server) writeBenchErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, gate.ErrIncomparable):
		writeError(w, http.StatusUnprocessableEntity, "incomparable", err.Error())
	case errors.Is(err, tuner.ErrNoTest):
		writeError(w, http.StatusUnprocessableEntity, "no_test", err.Error())
	default:
		s.writeErr(w, err)
	}
}

// runRow is a stored run without its cells' results (GET
// /api/v1/runs/{id} has them): what `tuner bench list` shows, with the
// cells' names, the requests measured and whether per-request data was
// kept (compare can test).
type runRow struct {
	*store.Run
	Cells    []string `json:"cells"`
	Requests int      `json:"requests"`
	Raw      bool     `json:"raw"`
}

// listRuns lists runs oldest first, filtered as `tuner bench list`:
// ?model=, ?tier=, ?label=k[=v] (repeatable).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	labels, err := tuner.ParseLabels(q["label"], true)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	runs, err := s.db.Runs(r.Context(), store.RunFilter{Model: q.Get("model"), Tier: q.Get("tier"), Labels: labels})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	rows := make([]runRow, len(runs))
	for i := range runs {
		x := &runs[i]
		rows[i] = runRow{Run: x, Cells: []string{}, Raw: x.HasRaw()}
		for _, c := range x.Cells {
			rows[i].Cells = append(rows[i].Cells, c.Name)
			rows[i].Requests += c.Requests
		}
	}
	writeJSON(w, http.StatusOK, rows)
}

// getRun is a run's report: the stored record as JSON (`tuner bench show
// --json`), or ?format=md|text as `tuner bench show` renders it.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.db.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeBenchErr(w, err)
		return
	}
	switch f := cmp.Or(r.URL.Query().Get("format"), "json"); f {
	case "json":
		writeJSON(w, http.StatusOK, run)
	case "md", "text":
		ct := "text/markdown; charset=utf-8"
		if f == "text" {
			ct = "text/plain; charset=utf-8"
		}
		w.Header().Set("Content-Type", ct)
		if err := bench.WriteRun(w, &run, f); err != nil {
			s.log.Error("run report", "run", run.ID, "err", err)
		}
	default:
		writeError(w, http.StatusBadRequest, "invalid", "--format "+f+": want json, md or text")
	}
}

// runRaw downloads a run's raw per-request data as CSV (`tuner bench
// export --csv`).
func (s *Server) runRaw(w http.ResponseWriter, r *http.Request) {
	run, err := s.db.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeBenchErr(w, err)
		return
	}
	if !run.HasRaw() {
		writeError(w, http.StatusNotFound, "no_raw", fmt.Sprintf("run %s has no per-request data (%s)", run.ID, run.Source))
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.csv"`, run.ID))
	if err := tuner.WriteRunCSV(r.Context(), s.db, &run, w); err != nil {
		s.log.Error("run raw data", "run", run.ID, "err", err) // the header is out: the body ends short
	}
}

// runPlot draws the run's QPS-vs-latency curves (`tuner bench plot`):
// ?metric= (default e2el_p50), ?format=svg|png|html (default svg).
func (s *Server) runPlot(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	metric, format := cmp.Or(q.Get("metric"), "e2el_p50"), cmp.Or(q.Get("format"), "svg")
	if err := tuner.CheckCurveMetric(metric); err != nil {
		s.writeErr(w, err)
		return
	}
	ct := map[string]string{"svg": "image/svg+xml", "png": "image/png", "html": "text/html; charset=utf-8"}[format]
	if ct == "" {
		writeError(w, http.StatusBadRequest, "invalid", "--format "+format+": want svg, png or html")
		return
	}
	run, err := s.db.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeBenchErr(w, err)
		return
	}
	if len(run.Cells) == 0 {
		writeError(w, http.StatusUnprocessableEntity, "empty", fmt.Sprintf("run %s has no measured cell", run.ID))
		return
	}
	w.Header().Set("Content-Type", ct)
	if err := chart.Render(w, tuner.RunCurves(&run, metric), format); err != nil {
		s.log.Error("run plot", "run", run.ID, "err", err)
	}
}

// ParseCompareQuery reads the query of GET /api/v1/compare: base and new
// (run IDs, latest, latest:K=V) or baseline_tier and new, and the gate's
// options (alpha, threshold, threshold_for (repeatable), no_correction,
// metrics) as `tuner bench compare` takes them.
func ParseCompareQuery(q url.Values) (tuner.CompareSpec, error) {
	cs := tuner.CompareSpec{Base: q.Get("base"), New: q.Get("new"), BaselineTier: q.Get("baseline_tier"), Gate: tuner.DefaultGateSpec()}
	switch {
	case cs.New == "":
		return cs, tuner.Usagef("compare needs new (a run ID, latest or latest:KEY=VALUE)")
	case cs.Base == "" && cs.BaselineTier == "":
		return cs, tuner.Usagef("compare needs base (a run ID, latest or latest:KEY=VALUE) or baseline_tier")
	case cs.Base != "" && cs.BaselineTier != "":
		return cs, tuner.Usagef("base and baseline_tier exclude each other")
	}
	if v := q.Get("alpha"); v != "" {
		a, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return cs, tuner.Usagef("--alpha %q: want a level in (0, 1)", v)
		}
		cs.Gate.Alpha = a
	}
	if v := q.Get("threshold"); v != "" {
		cs.Gate.Threshold = v
	}
	cs.Gate.ThresholdFor = q["threshold_for"]
	cs.Gate.Metrics = q.Get("metrics")
	if v := q.Get("no_correction"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cs, tuner.Usagef("no_correction %q: want true or false", v)
		}
		cs.Gate.NoCorrection = b
	}
	_, err := cs.Gate.Config()
	return cs, err
}

// compare is the regression gate on two stored runs (`tuner bench
// compare`): the report as JSON (format=json, the default; "regressed"
// says the verdict), Markdown (format=md) or text. Runs the gate cannot
// judge are 422 with the reason.
func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	format := cmp.Or(q.Get("format"), "json")
	if format != "json" && format != "md" && format != "text" {
		writeError(w, http.StatusBadRequest, "invalid", "--format "+format+": want json, md or text")
		return
	}
	cs, err := ParseCompareQuery(q)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	cmp, err := tuner.CompareRuns(r.Context(), s.db, cs)
	if err != nil {
		s.writeBenchErr(w, err)
		return
	}
	s.metrics.gate.Observe(cmp.Report, time.Now())
	switch format {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		err = gate.WriteJSON(w, cmp.Report)
	case "md":
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		err = gate.WriteMarkdown(w, cmp.Report)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		err = gate.WriteText(w, cmp.Report)
	}
	if err != nil {
		s.log.Error("compare report", "base", cmp.Base.ID, "new", cmp.New.ID, "err", err)
	}
}
