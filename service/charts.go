package service

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// The dashboard's charts: each drawn by package chart, as `tuner pareto`,
// `show --plot` and the others draw them.

// chartFormat reads ?format= (html, svg or png) and sets the content type.
func chartFormat(w http.ResponseWriter, r *http.Request) (string, error) {
	format := cmp.Or(r.URL.Query().Get("format"), "html")
	ct := map[string]string{"svg": "image/svg+xml", "png": "image/png", "html": "text/html; charset=utf-8"}[format]
	if ct == "" {
		return "", tuner.Usagef("format %q: want html, svg or png", format)
	}
	w.Header().Set("Content-Type", ct)
	return format, nil
}

// studyChart draws a chart of a study: front, progress (the optimisation
// history), importance (permutation importance of the searched flags) or
// parallel (parallel coordinates).
func (s *Server) studyChart(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	var f chart.Figure
	switch kind := r.PathValue("kind"); kind {
	case "front":
		f = v.frontChart()
	case "progress":
		f = tuner.ProgressChart(v.study, v.trials, v.slo, v.metrics)
	case "parallel":
		f = tuner.ParallelChart(v.study, v.trials, v.slo, v.metrics)
	case "importance":
		var reason string
		if f, reason = tuner.ImportanceChart(v.study, v.trials, v.metrics, 1); reason != "" {
			writeError(w, http.StatusUnprocessableEntity, "no_importance", "parameter importance: "+reason)
			return
		}
	default:
		s.writeErr(w, fmt.Errorf("chart %q (want front, progress, importance or parallel): %w", kind, store.ErrNotFound))
		return
	}
	s.writeChart(w, r, f, "study "+v.study.ID)
}

// writeChart sends a figure in the format asked; one with nothing to
// draw is a 422 saying so.
func (s *Server) writeChart(w http.ResponseWriter, r *http.Request, f chart.Figure, what string) {
	format, err := chartFormat(w, r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// Rendered to memory first: a figure with nothing to draw fails
	// before the header is out.
	var buf bytes.Buffer
	if err := chart.Render(&buf, f, format); err != nil {
		w.Header().Del("Content-Type")
		writeError(w, http.StatusUnprocessableEntity, "empty", fmt.Sprintf("%s: %v", what, err))
		return
	}
	_, _ = buf.WriteTo(w)
}

// trialChart draws a trial's latency breakdown per level or its feedback
// trace.
func (s *Server) trialChart(w http.ResponseWriter, r *http.Request) {
	t, err := s.db.Trial(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	title := "trial " + t.ID
	var f chart.Figure
	switch kind := r.PathValue("kind"); kind {
	case "breakdown":
		f = chart.Breakdown(title, chart.ResultBars(t.Result))
	case "trace":
		var traces []chart.TraceSeries
		if t.Result != nil && t.Result.Feedback != nil {
			traces = append(traces, chart.TraceOf(t.ID, t.Result.Feedback))
		}
		f = chart.Trace(title, traces)
	default:
		s.writeErr(w, fmt.Errorf("chart %q (want breakdown or trace): %w", kind, store.ErrNotFound))
		return
	}
	s.writeChart(w, r, f, "trial "+t.ID)
}

// logTail is how much of an engine log the trial page shows.
const logTail = 16 << 10

// trialLog sends the last 16 KiB of a trial's engine log.
func (s *Server) trialLog(w http.ResponseWriter, r *http.Request) {
	t, err := s.db.Trial(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if t.Result == nil || t.Result.LogPath == "" {
		s.writeErr(w, fmt.Errorf("trial %s kept no engine log (sim-virtual runs no engine process): %w", t.ID, store.ErrNotFound))
		return
	}
	f, err := os.Open(t.Result.LogPath)
	if err != nil {
		s.writeErr(w, fmt.Errorf("trial %s: engine log is gone: %w", t.ID, store.ErrNotFound))
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > logTail {
		_, _ = f.Seek(st.Size()-logTail, io.SeekStart)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.Copy(w, f)
}
