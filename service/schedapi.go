package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// scheduleRoutes adds the schedules to the API.
func (s *Server) scheduleRoutes(read, write func(string, http.HandlerFunc)) {
	read("GET /api/v1/schedules", s.listSchedules)
	read("GET /api/v1/schedules/{id}", s.getSchedule)
	read("GET /api/v1/schedules/{id}/runs", s.scheduleRuns)
	read("GET /api/v1/schedules/{id}/charts/trend", s.scheduleTrend)
	write("POST /api/v1/schedules", s.postSchedule)
	write("PUT /api/v1/schedules/{id}", s.putSchedule)
	write("PATCH /api/v1/schedules/{id}", s.patchSchedule)
	write("DELETE /api/v1/schedules/{id}", s.deleteSchedule)
}

// Schedule limits: a name people can type, and no firing more often than
// once a minute (the finest step of a five-field expression).
const (
	maxScheduleName = 64
	minEvery        = time.Minute
)

// parseSchedule reads a schedule body: name, cron, catch_up (default
// true), paused, gate (the regression gate's options for its benchmark
// runs, as GET /api/v1/compare takes them) and the job it queues, either
// as "job": {...} or as the rest of the top-level fields (what POST
// /api/v1/jobs takes). Errors are usage errors naming the field.
// The second result says whether the body set "paused" (an edit without
// it keeps the schedule's state).
func (s *Server) parseSchedule(ctx context.Context, body []byte) (store.Schedule, bool, error) {
	var fields map[string]json.RawMessage
	if err := decodeBody("schedule body", bytes.NewReader(body), &fields); err != nil {
		return store.Schedule{}, false, err
	}
	_, hasPaused := fields["paused"]
	sc, err := s.scheduleFields(ctx, fields)
	return sc, hasPaused, err
}

// scheduleFields checks the fields of a schedule body.
func (s *Server) scheduleFields(ctx context.Context, fields map[string]json.RawMessage) (store.Schedule, error) {
	sc := store.Schedule{CatchUp: true}
	take := func(k string, v any) error {
		raw, ok := fields[k]
		if !ok {
			return nil
		}
		delete(fields, k)
		if err := json.Unmarshal(raw, v); err != nil {
			return tuner.Usagef("schedule body: %s: %v", k, err)
		}
		return nil
	}
	for k, v := range map[string]any{"name": &sc.Name, "cron": &sc.Cron, "catch_up": &sc.CatchUp, "paused": &sc.Paused} {
		if err := take(k, v); err != nil {
			return sc, err
		}
	}
	switch n := strings.TrimSpace(sc.Name); {
	case n == "":
		return sc, tuner.Usagef("schedule body: name: required")
	case len(n) > maxScheduleName:
		return sc, tuner.Usagef("schedule body: name: over %d bytes", maxScheduleName)
	case strings.IndexFunc(n, unicode.IsControl) >= 0:
		return sc, tuner.Usagef("schedule body: name: control characters")
	default:
		sc.Name = n
	}
	if err := s.checkCron(sc.Cron); err != nil {
		return sc, err
	}
	if raw, ok := fields["gate"]; ok {
		delete(fields, "gate")
		gs := tuner.DefaultGateSpec()
		if err := bounded.DecodeJSON("gate", raw, &gs, true); err != nil {
			return sc, tuner.Usagef("schedule body: %w", err)
		}
		if _, err := gs.Config(); err != nil {
			return sc, tuner.Usagef("schedule body: gate: %w", err)
		}
		sc.Gate, _ = json.Marshal(gs)
	}
	job, nested := fields["job"]
	if nested {
		delete(fields, "job")
		for k := range fields {
			return sc, tuner.Usagef("schedule body: %s: unknown field (with \"job\", the job's fields go inside it)", k)
		}
	} else {
		job, _ = json.Marshal(fields)
	}
	if _, _, err := s.parseJob(ctx, job); err != nil {
		return sc, tuner.Usagef("schedule body: %w", err)
	}
	sc.Job = job
	return sc, nil
}

// checkCron refuses an expression the parser refuses (its message
// quoted) or one firing more often than once a minute.
func (s *Server) checkCron(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return tuner.Usagef("schedule body: cron: required (e.g. \"0 2 * * *\" or \"@daily\")")
	}
	c, err := parseCron(expr, s.cfg.Location)
	if err != nil {
		return tuner.Usagef("schedule body: cron %q: %v", expr, err)
	}
	if d, ok := c.(cron.ConstantDelaySchedule); ok && d.Delay < minEvery {
		return tuner.Usagef("schedule body: cron %q: fires every %s; at most once a minute", expr, d.Delay)
	}
	return nil
}

// nextFire is a schedule's next fire time from now (zero while paused).
func (s *Server) nextFire(sc store.Schedule) time.Time {
	if sc.Paused {
		return time.Time{}
	}
	c, err := parseCron(sc.Cron, s.cfg.Location)
	if err != nil {
		return time.Time{}
	}
	return c.Next(s.clock.Now()).UTC()
}

// scheduleView is a schedule as the API shows it: the stored record, what
// it runs, and how its latest job ended.
type scheduleView struct {
	store.Schedule
	Kind  string      `json:"kind"`
	Tier  string      `json:"tier,omitempty"`
	Model string      `json:"model,omitempty"`
	Last  *lastResult `json:"last_result,omitempty"`
}

// lastResult is the state of a schedule's latest job and the gate's
// verdicts on its runs.
type lastResult struct {
	Job   string          `json:"job"`
	State store.JobState  `json:"state"`
	Error string          `json:"error,omitempty"`
	Gates []store.JobGate `json:"gates,omitempty"`
}

func (s *Server) viewOf(ctx context.Context, sc store.Schedule) scheduleView {
	v := scheduleView{Schedule: sc, Kind: KindSearch}
	var what struct {
		Kind, Tier, Model string
	}
	if json.Unmarshal(sc.Job, &what) == nil {
		v.Tier, v.Model = what.Tier, what.Model
		if what.Kind != "" {
			v.Kind = what.Kind
		}
	}
	if sc.LastJob != "" {
		if j, err := s.db.Job(ctx, sc.LastJob); err == nil {
			v.Last = &lastResult{Job: j.ID, State: j.State, Error: j.Error, Gates: j.Gates}
		}
	}
	return v
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := s.db.Schedules(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := make([]scheduleView, len(list))
	for i, sc := range list {
		out[i] = s.viewOf(r.Context(), sc)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.db.Schedule(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.viewOf(r.Context(), sc))
}

// readSchedule reads and checks a schedule body; false: the error is
// answered.
func (s *Server) readSchedule(w http.ResponseWriter, r *http.Request) (sc store.Schedule, hasPaused, ok bool) {
	body, ok := s.readBody(w, r, "schedule body")
	if !ok {
		return sc, false, false
	}
	sc, hasPaused, err := s.parseSchedule(r.Context(), body)
	if err != nil {
		s.writeErr(w, err)
		return sc, hasPaused, false
	}
	return sc, hasPaused, true
}

func (s *Server) postSchedule(w http.ResponseWriter, r *http.Request) {
	sc, _, ok := s.readSchedule(w, r)
	if !ok {
		return
	}
	sc.NextFire = s.nextFire(sc)
	var err error
	if sc, err = s.db.AddSchedule(r.Context(), sc); err != nil {
		s.writeErr(w, err)
		return
	}
	s.log.Info("schedule added", "schedule", sc.ID, "name", sc.Name, "cron", sc.Cron, "next", sc.NextFire)
	s.wakeScheduler()
	writeJSON(w, http.StatusCreated, s.viewOf(r.Context(), sc))
}

// putSchedule replaces a schedule's definition (the body of POST; without
// "paused" it stays paused or active as it was); its next fire time
// follows the new expression from now.
func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	sc, hasPaused, ok := s.readSchedule(w, r)
	if !ok {
		return
	}
	s.updateSchedule(w, r, func(stored store.Schedule) store.Schedule {
		if !hasPaused {
			sc.Paused = stored.Paused
		}
		return sc
	})
}

// patchSchedule pauses or resumes a schedule: {"paused": true|false}. A
// resumed schedule fires at its next slot from now (the paused ones are
// not caught up).
func (s *Server) patchSchedule(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, "schedule body")
	if !ok {
		return
	}
	var req struct {
		Paused *bool `json:"paused"`
	}
	if err := decodeBody("schedule body", bytes.NewReader(body), &req); err != nil {
		s.writeErr(w, err)
		return
	}
	if req.Paused == nil {
		s.writeErr(w, tuner.Usagef("schedule body: paused: required (true pauses, false resumes)"))
		return
	}
	s.updateSchedule(w, r, func(sc store.Schedule) store.Schedule {
		sc.Paused = *req.Paused
		return sc
	})
}

// updateSchedule stores edit(stored) with its next fire time from now.
func (s *Server) updateSchedule(w http.ResponseWriter, r *http.Request, edit func(store.Schedule) store.Schedule) {
	stored, err := s.db.Schedule(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	sc := edit(stored)
	sc.ID, sc.Seq = stored.ID, stored.Seq
	sc.NextFire = s.nextFire(sc)
	if sc, err = s.db.UpdateSchedule(r.Context(), sc); err != nil {
		s.writeErr(w, err)
		return
	}
	s.log.Info("schedule updated", "schedule", sc.ID, "name", sc.Name, "cron", sc.Cron, "paused", sc.Paused, "next", sc.NextFire)
	s.wakeScheduler()
	writeJSON(w, http.StatusOK, s.viewOf(r.Context(), sc))
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.db.DeleteSchedule(r.Context(), r.PathValue("id")); err != nil {
		s.writeErr(w, err)
		return
	}
	s.log.Info("schedule deleted", "schedule", r.PathValue("id"))
	s.wakeScheduler()
	w.WriteHeader(http.StatusNoContent)
}

// scheduleRun is one firing with what became of its job: its state, its
// study or benchmark runs, and the gate's verdicts on the runs.
type scheduleRun struct {
	store.ScheduleFire
	JobState store.JobState  `json:"job_state,omitempty"`
	JobError string          `json:"job_error,omitempty"`
	Study    string          `json:"study,omitempty"`
	Runs     []string        `json:"runs,omitempty"`
	Gates    []store.JobGate `json:"gates,omitempty"`
}

// scheduleHistory is GET /api/v1/schedules/{id}/runs: the firings, oldest
// first, and for a benchmark schedule the trend of its runs (`tuner bench
// history --label schedule=ID`).
type scheduleHistory struct {
	Schedule  scheduleView         `json:"schedule"`
	Runs      []scheduleRun        `json:"runs"`
	Trend     *tuner.HistoryReport `json:"trend,omitempty"`
	TrendNote string               `json:"trend_note,omitempty"`
}

// Defaults of the history's query.
const (
	defaultHistory = 100
	maxHistory     = 1000
)

// scheduleRuns is a schedule's history: ?limit= firings (default 100, at
// most 1000) and the trend of ?metric= (default tpot_p50).
func (s *Server) scheduleRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultHistory
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistory {
			s.writeErr(w, tuner.Usagef("limit %q: want 1 to %d", v, maxHistory))
			return
		}
		limit = n
	}
	ctx := r.Context()
	sc, err := s.db.Schedule(ctx, r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	fires, err := s.db.ScheduleFires(ctx, sc.ID, limit)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := scheduleHistory{Schedule: s.viewOf(ctx, sc), Runs: make([]scheduleRun, len(fires))}
	for i, f := range fires {
		row := scheduleRun{ScheduleFire: f}
		if f.Job != "" {
			if j, err := s.db.Job(ctx, f.Job); err == nil {
				row.JobState, row.JobError, row.Study, row.Runs, row.Gates = j.State, j.Error, j.Study, j.BenchRuns, j.Gates
			}
		}
		out.Runs[i] = row
	}
	if out.Schedule.Kind == KindBench {
		rep, err := s.trend(ctx, sc, q.Get("metric"))
		if err != nil {
			if !errors.As(err, new(tuner.UsageError)) {
				s.writeErr(w, err)
				return
			}
			out.TrendNote = err.Error()
		}
		out.Trend = rep
	}
	writeJSON(w, http.StatusOK, out)
}

// scheduleTrend draws the trend of a benchmark schedule's runs (?metric=,
// ?format=html|svg|png), regressions against the previous run marked.
func (s *Server) scheduleTrend(w http.ResponseWriter, r *http.Request) {
	sc, err := s.db.Schedule(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	rep, err := s.trend(r.Context(), sc, r.URL.Query().Get("metric"))
	if errors.As(err, new(tuner.UsageError)) {
		writeError(w, http.StatusUnprocessableEntity, "no_trend", "schedule "+sc.Name+": "+err.Error())
		return
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeChart(w, r, rep.Chart(), "schedule "+sc.ID)
}

// trend is `tuner bench history` over the schedule's runs (its label),
// with the schedule's gate options.
func (s *Server) trend(ctx context.Context, sc store.Schedule, metric string) (*tuner.HistoryReport, error) {
	m, err := gate.ParseMetric(cmp.Or(metric, "tpot_p50"))
	if err != nil {
		return nil, tuner.Usagef("metric: %w", err)
	}
	gs := tuner.DefaultGateSpec()
	if len(sc.Gate) > 0 {
		_ = json.Unmarshal(sc.Gate, &gs)
	}
	cfg, err := gs.Config()
	if err != nil {
		return nil, err
	}
	cfg.Metrics = []gate.Metric{m}
	rep, err := tuner.BenchHistory(ctx, s.db, store.RunFilter{Labels: map[string]string{"schedule": sc.ID}}, "", cfg)
	if err != nil {
		return nil, err
	}
	rep.Model = "schedule " + sc.Name
	return rep, nil
}
