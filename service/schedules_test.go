package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
	"github.com/vllm-tuner/tuner/tuner"
)

// fakeClock is a Clock the test moves: a wait for a time the clock has
// reached (or passes later) receives at once.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits map[chan time.Time]time.Time
}

func newFakeClock(t time.Time) *fakeClock {
	return &fakeClock{now: t, waits: map[chan time.Time]time.Time{}}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) At(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch, func() {}
	}
	c.waits[ch] = t
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.waits, ch)
	}
}

// Set moves the clock to t and wakes the waits it reaches.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	for ch, at := range c.waits {
		if !at.After(t) {
			ch <- t
			delete(c.waits, ch)
		}
	}
}

var _ Clock = (*fakeClock)(nil)

// day1 is the tests' first day; the schedules fire at 02:00 UTC.
var day1 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func at(day int, hour int) time.Time {
	return day1.Add(time.Duration(day-1)*24*time.Hour + time.Duration(hour)*time.Hour)
}

// benchSchedule is a schedule body of a small sim-virtual benchmark.
func benchSchedule(name, cron, extra string) string {
	m, _ := json.Marshal(fmt.Sprintf(testMatrix, 60))
	return fmt.Sprintf(`{"name":%q,"cron":%q,"kind":"bench","engine":"sim-virtual","model":%q,"gpu":%q,"config":"default","matrix_yaml":%s%s}`,
		name, cron, testModel, testGPU, m, extra)
}

// serveDB serves a Server on db with the fake clock (UTC schedules); run
// starts its job workers and scheduler, schedulerOnly only the scheduler.
// stop ends them (and the listener).
func serveDB(t *testing.T, db store.DB, clk Clock, cfg Config, run, schedulerOnly bool) (e *env, stop func()) {
	t.Helper()
	cfg.DB, cfg.Clock, cfg.Location, cfg.DataDir = db, clk, time.UTC, t.TempDir()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	e = &env{srv: srv, ts: ts}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	switch {
	case run:
		go func() { defer close(done); srv.Run(ctx) }()
	case schedulerOnly:
		go func() { defer close(done); srv.scheduler(ctx) }()
	default:
		close(done)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ts.CloseClientConnections()
			ts.Close()
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return e, stop
}

func openBolt(t *testing.T, path string) store.DB {
	t.Helper()
	st, err := boltstore.Open(context.Background(), path, boltstore.Options{NoSync: true, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// subscribe returns the server's events (as the SSE stream sends them).
func subscribe(t *testing.T, srv *Server) <-chan Event {
	c, _ := srv.hub.subscribe()
	t.Cleanup(func() { srv.hub.unsubscribe(c) })
	return c
}

// waitFire waits for the firing of schedule id whose line has want.
func waitFire(t *testing.T, ch <-chan Event, id, want string) Event {
	t.Helper()
	timeout := time.After(2 * time.Minute) // a hang guard, not a speed assertion
	for {
		select {
		case ev := <-ch:
			if ev.Schedule == id && strings.Contains(ev.Line, want) {
				return ev
			}
		case <-timeout:
			t.Fatalf("schedule %s: no firing with %q", id, want)
		}
	}
}

func decodeAs[T any](t *testing.T, code int, body string, want int) T {
	t.Helper()
	var v T
	if code != want {
		t.Fatalf("status %d, want %d: %s", code, want, body)
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// TestScheduleFiresSkipsAndPauses runs the scheduler on a fake clock: the
// schedule fires at 02:00 and queues a benchmark job tagged with it (its
// runs labelled); the next day the job is still queued, so the firing is
// skipped and says why; paused, it does not fire; resumed, it fires at its
// next slot from then (the paused slot is not caught up). On a bbolt file
// and on PostgreSQL.
func TestScheduleFiresSkipsAndPauses(t *testing.T) {
	onEachBackend(t, firesSkipsAndPauses)
}

func firesSkipsAndPauses(t *testing.T, db store.DB) {
	clk := newFakeClock(at(1, 1))
	e, _ := serveDB(t, db, clk, Config{}, false, true)
	ch := subscribe(t, e.srv)
	code, out := e.do(t, "POST", "/api/v1/schedules", "", benchSchedule("nightly", "0 2 * * *", ""))
	sc := decodeAs[scheduleView](t, code, out, http.StatusCreated)
	if sc.ID != "sched-1" || sc.Kind != KindBench || !sc.CatchUp || !sc.NextFire.Equal(at(1, 2)) {
		t.Fatalf("created schedule: %+v", sc)
	}

	// A second before its time, a pass fires nothing and waits for 02:00.
	clk.Set(at(1, 2).Add(-time.Second))
	if next, err := e.srv.schedulePass(context.Background()); err != nil || !next.Equal(at(1, 2)) {
		t.Fatalf("pass at 01:59:59: next %v, %v; want 02:00", next, err)
	}
	if fires, err := db.ScheduleFires(context.Background(), sc.ID, 0); err != nil || len(fires) != 0 {
		t.Fatalf("fired before its time: %+v, %v", fires, err)
	}
	clk.Set(at(1, 2))
	ev := waitFire(t, ch, sc.ID, "queued")
	j, err := db.Job(context.Background(), ev.Job)
	if err != nil || j.Schedule != sc.ID || j.Kind != KindBench || j.State != store.JobQueued || !strings.Contains(string(j.Spec), `"schedule=sched-1"`) {
		t.Fatalf("fired job %+v, %v", j, err)
	}

	clk.Set(at(2, 2))
	waitFire(t, ch, sc.ID, "skipped (the previous job "+j.ID+" is still queued)")

	code, out = e.do(t, "PATCH", "/api/v1/schedules/"+sc.ID, "", `{"paused":true}`)
	if p := decodeAs[scheduleView](t, code, out, http.StatusOK); !p.Paused || !p.NextFire.IsZero() {
		t.Fatalf("paused: %+v", p)
	}
	clk.Set(at(3, 2)) // no firing while paused
	clk.Set(at(3, 3))
	j.State = store.JobDone
	if err := db.UpdateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	code, out = e.do(t, "PATCH", "/api/v1/schedules/"+sc.ID, "", `{"paused":false}`)
	if p := decodeAs[scheduleView](t, code, out, http.StatusOK); p.Paused || !p.NextFire.Equal(at(4, 2)) {
		t.Fatalf("resumed: %+v", p)
	}
	clk.Set(at(4, 2))
	ev = waitFire(t, ch, sc.ID, "queued")

	code, out = e.do(t, "GET", "/api/v1/schedules/"+sc.ID+"/runs", "", "")
	h := decodeAs[scheduleHistory](t, code, out, http.StatusOK)
	var got []string
	for _, r := range h.Runs {
		got = append(got, fmt.Sprintf("%s %s %s %s", r.Slot.Format("02T15"), r.Outcome, r.Job, r.JobState))
	}
	want := []string{"01T02 queued job-1 done", "02T02 skipped  ", "04T02 queued job-2 queued"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history %q, want %q", got, want)
	}
	if h.Schedule.Last == nil || h.Schedule.Last.Job != ev.Job || !h.Schedule.NextFire.Equal(at(5, 2)) || h.TrendNote == "" {
		t.Fatalf("schedule in the history: %+v, trend note %q", h.Schedule, h.TrendNote)
	}
	if code, out := e.do(t, "GET", "/metrics", "", ""); code != http.StatusOK || !strings.Contains(out, `tuner_schedule_firings_total{outcome="queued",schedule="nightly"} 2`) ||
		!strings.Contains(out, `tuner_schedule_firings_total{outcome="skipped",schedule="nightly"} 1`) {
		t.Fatalf("metrics: the firings missing")
	}
}

// TestScheduleCatchUpAfterRestart: slots that passed while the service was
// down (the store and the scheduler closed and opened again) run once, as
// a catch-up saying how many were missed; with catch_up false they are
// recorded as missed and nothing runs. On a bbolt file and on PostgreSQL.
func TestScheduleCatchUpAfterRestart(t *testing.T) {
	forBackends(t, func(t *testing.T, open func() store.DB) {
		clk := newFakeClock(at(1, 1))
		db := open()
		e, stop := serveDB(t, db, clk, Config{}, false, true)
		for _, body := range []string{benchSchedule("catch", "0 2 * * *", ""), benchSchedule("nocatch", "@nightly", `,"catch_up":false`)} {
			code, out := e.do(t, "POST", "/api/v1/schedules", "", body)
			decodeAs[scheduleView](t, code, out, http.StatusCreated)
		}
		stop()
		db.Close()

		clk.Set(at(4, 5)) // four 02:00 slots passed while down
		db = open()
		defer db.Close()
		e, _ = serveDB(t, db, clk, Config{}, false, false)
		ch := subscribe(t, e.srv)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.srv.scheduler(ctx) }()
		defer func() { cancel(); <-done }()
		waitFire(t, ch, "sched-1", "queued")
		waitFire(t, ch, "sched-2", "missed")

		for id, want := range map[string]string{
			"sched-1": "queued 4 run(s) due while the service was down, the first at 2026-03-01T02:00:00Z; run once now (catch-up)",
			"sched-2": "missed 4 run(s) due while the service was down, the first at 2026-03-01T02:00:00Z; catch_up is off",
		} {
			fires, err := db.ScheduleFires(context.Background(), id, 0)
			if err != nil || len(fires) != 1 || !fires[0].CatchUp || string(fires[0].Outcome)+" "+fires[0].Reason != want {
				t.Fatalf("%s history %+v, %v; want one firing: %s", id, fires, err, want)
			}
			sc, err := db.Schedule(context.Background(), id)
			if err != nil || !sc.NextFire.Equal(at(5, 2)) {
				t.Fatalf("%s next fire %v, %v; want %v", id, sc.NextFire, err, at(5, 2))
			}
		}
		if js, err := db.Jobs(context.Background()); err != nil || len(js) != 1 || js[0].Schedule != "sched-1" {
			t.Fatalf("jobs %+v, %v; want one, of the catch-up", js, err)
		}
	})
}

// forBackends runs fn on a bbolt file and on a PostgreSQL database; open
// opens the same database on every call.
func forBackends(t *testing.T, fn func(t *testing.T, open func() store.DB)) {
	t.Run("bolt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tuner.db")
		fn(t, func() store.DB { return openBolt(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.DB(t)
		fn(t, func() store.DB {
			pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			return pg
		})
	})
}

// onEachBackend runs fn on a bbolt file and on a PostgreSQL database,
// opened once and closed when fn returns.
func onEachBackend(t *testing.T, fn func(t *testing.T, db store.DB)) {
	forBackends(t, func(t *testing.T, open func() store.DB) {
		db := open()
		defer db.Close()
		fn(t, db)
	})
}

// TestScheduleAPIErrors: bad bodies are 400 naming the field (the cron
// parser's own message quoted), a name in use 409, a missing schedule 404;
// writes need the token. On a bbolt file and on PostgreSQL.
func TestScheduleAPIErrors(t *testing.T) {
	onEachBackend(t, scheduleAPIErrors)
}

func scheduleAPIErrors(t *testing.T, db store.DB) {
	const token = "tok"
	e, _ := serveDB(t, db, newFakeClock(at(1, 1)), Config{Token: token}, false, false)
	for _, tc := range []struct{ body, want string }{
		{benchSchedule("x", "0 2 * *", ""), `schedule body: cron "0 2 * *": expected exactly 5 fields, found 4`},
		{benchSchedule("x", "61 2 * * *", ""), `schedule body: cron "61 2 * * *": end of range (61) above maximum (59)`},
		{benchSchedule("x", "@every 10s", ""), "at most once a minute"},
		{benchSchedule("x", "", ""), "schedule body: cron: required"},
		{benchSchedule("", "@daily", ""), "schedule body: name: required"},
		{benchSchedule("x", "@daily", `,"catch_up":"yes"`), "schedule body: catch_up:"},
		{benchSchedule("x", "@daily", `,"gate":{"alpha":2}`), "schedule body: gate: --alpha 2"},
		{benchSchedule("x", "@daily", `,"gate":{"alfa":0.1}`), `unknown field "alfa"`},
		{benchSchedule("x", "@daily", `,"vllm":"/bin/sh"`), "vllm names a file or program of the server"},
		{`{"name":"x","cron":"@daily","job":{"kind":"bench"},"tier":"smoke"}`, "schedule body: tier: unknown field"},
		{`{"name":"x","cron":"@daily","trials":"many"}`, "job body"},
	} {
		code, out := e.do(t, "POST", "/api/v1/schedules", token, tc.body)
		var ae apiError
		if code != http.StatusBadRequest || json.Unmarshal([]byte(out), &ae) != nil || ae.Code != "invalid" || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("POST %s: %d %s; want 400 with %q", tc.body, code, out, tc.want)
		}
	}
	if code, _ := e.do(t, "POST", "/api/v1/schedules", "", benchSchedule("x", "@daily", "")); code != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d", code)
	}
	code, out := e.do(t, "POST", "/api/v1/schedules", token, `{"name":"nested","cron":"@weekly","job":{"model":"`+testModel+`","gpu":"H100-80GB","engine":"sim-virtual","trials":2}}`)
	if v := decodeAs[scheduleView](t, code, out, http.StatusCreated); v.Kind != KindSearch || v.Model != testModel || !v.NextFire.Equal(time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("nested job body: %+v", v)
	}
	if code, out := e.do(t, "POST", "/api/v1/schedules", token, benchSchedule("nested", "@daily", "")); code != http.StatusConflict || !strings.Contains(out, "already exists") {
		t.Fatalf("a second schedule named nested: %d %s", code, out)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/v1/schedules/sched-9", ""}, {"DELETE", "/api/v1/schedules/sched-9", ""},
		{"PATCH", "/api/v1/schedules/sched-9", `{"paused":true}`}, {"GET", "/api/v1/schedules/nope/runs", ""},
	} {
		if code, out := e.do(t, tc.method, tc.path, token, tc.body); code != http.StatusNotFound {
			t.Errorf("%s %s: %d %s; want 404", tc.method, tc.path, code, out)
		}
	}
	if code, out := e.do(t, "PATCH", "/api/v1/schedules/sched-1", token, `{}`); code != http.StatusBadRequest || !strings.Contains(out, "paused: required") {
		t.Fatalf("PATCH without paused: %d %s", code, out)
	}
	if code, _ := e.do(t, "DELETE", "/api/v1/schedules/sched-1", token, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	if code, out := e.do(t, "GET", "/api/v1/schedules", token, ""); code != http.StatusOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after delete: %d %s", code, out)
	}
}

// TestScheduledRunsGateAndAlert: a benchmark schedule's runs are gated
// against its previous run and a regression is sent to the webhook as an
// Alertmanager alert (the second run on a 40% slower simulator); a failed
// scheduled run is sent too; the history shows each run's verdict and the
// trend marks the regression. On a bbolt file and on PostgreSQL.
func TestScheduledRunsGateAndAlert(t *testing.T) {
	forBackends(t, scheduledRunsGateAndAlert)
}

func scheduledRunsGateAndAlert(t *testing.T, open func() store.DB) {
	e, db, clk, ch, alerts := alertEnv(t, open, true)
	code, out := e.do(t, "POST", "/api/v1/schedules", "", benchSchedule("hourly", "0 * * * *", ""))
	sc := decodeAs[scheduleView](t, code, out, http.StatusCreated)
	runOnce := func(hour int, state store.JobState) store.Job {
		t.Helper()
		clk.Set(at(1, hour))
		ev := waitFire(t, ch, sc.ID, "queued")
		waitState(t, ch, ev.Job, state)
		j, err := db.Job(context.Background(), ev.Job)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	first := runOnce(2, store.JobDone)
	if len(first.Gates) != 1 || first.Gates[0].Verdict != "none" || !strings.Contains(first.Gates[0].Summary, "first finished run") {
		t.Fatalf("first run's gate: %+v", first.Gates)
	}
	code, out = e.do(t, "PUT", "/api/v1/schedules/"+sc.ID, "", benchSchedule("hourly", "0 * * * *", `,"engine_args":["--slowdown=1.4"]`))
	decodeAs[scheduleView](t, code, out, http.StatusOK)
	second := runOnce(3, store.JobDone)
	if len(second.Gates) != 1 || second.Gates[0].Verdict != "regression" || second.Gates[0].Base != first.BenchRuns[0] || second.Gates[0].Regressions == 0 {
		t.Fatalf("second run's gate: %+v", second.Gates)
	}
	wantAlert(t, alerts, "TunerRegression", map[string]string{"schedule": sc.ID, "schedule_name": "hourly", "run": second.BenchRuns[0], "base_run": first.BenchRuns[0], "job": second.ID})

	// A run that fails (nothing listens at the URL) is sent too.
	m, _ := json.Marshal(fmt.Sprintf(testMatrix, 20))
	code, out = e.do(t, "PUT", "/api/v1/schedules/"+sc.ID, "", fmt.Sprintf(`{"name":"hourly","cron":"0 * * * *","kind":"bench","url":%q,"model":%q,"matrix_yaml":%s}`,
		deadURL(t), testModel, m))
	decodeAs[scheduleView](t, code, out, http.StatusOK)
	third := runOnce(4, store.JobFailed)
	wantAlert(t, alerts, "TunerRunFailed", map[string]string{"schedule": sc.ID, "job": third.ID})

	code, out = e.do(t, "GET", "/api/v1/schedules/"+sc.ID+"/runs", "", "")
	h := decodeAs[struct {
		Runs  []scheduleRun
		Trend *struct{ Points []tuner.HistoryPoint }
	}](t, code, out, http.StatusOK)
	if len(h.Runs) != 3 || h.Runs[1].Gates[0].Verdict != "regression" || h.Runs[2].JobState != store.JobFailed || h.Trend == nil {
		t.Fatalf("history %+v", h)
	}
	var marked bool
	for _, p := range h.Trend.Points {
		marked = marked || (p.Run == second.BenchRuns[0] && p.Verdict == "regression")
	}
	if !marked {
		t.Fatalf("trend %+v: want the second run marked a regression", h.Trend.Points)
	}
	if code, out := e.do(t, "GET", "/api/v1/schedules/"+sc.ID+"/charts/trend?format=svg", "", ""); code != http.StatusOK || !strings.Contains(out, "<svg") {
		t.Fatalf("trend chart: %d %.200s", code, out)
	}
	if code, out := e.do(t, "GET", "/metrics", "", ""); code != http.StatusOK || !strings.Contains(out, `tuner_gate_verdict{model="`+testModel+`",verdict="regression"} 1`) {
		t.Fatalf("metrics: the gate's verdict missing")
	}
}

// alertHook is a webhook receiver in the test and a sender to it.
func alertHook(t *testing.T) (*alert.Sender, <-chan []model.Alert) {
	alerts := make(chan []model.Alert, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var as []model.Alert
		if err := json.NewDecoder(r.Body).Decode(&as); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		alerts <- as
	}))
	t.Cleanup(hook.Close)
	snd, err := alert.NewSender(alert.Config{URL: hook.URL, Format: alert.FormatAlertmanager, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return snd, alerts
}

// alertEnv serves the database open opens on a fake clock with alerts to
// a webhook receiver in the test; jobs run too when run is set, else only
// the scheduler.
func alertEnv(t *testing.T, open func() store.DB, run bool) (*env, store.DB, *fakeClock, <-chan Event, <-chan []model.Alert) {
	snd, alerts := alertHook(t)
	clk := newFakeClock(at(1, 1))
	db := open()
	t.Cleanup(func() { db.Close() })
	e, _ := serveDB(t, db, clk, Config{Alerts: snd}, run, !run)
	return e, db, clk, subscribe(t, e.srv), alerts
}

// wantAlert waits for one Alertmanager alert named name with labels.
func wantAlert(t *testing.T, alerts <-chan []model.Alert, name string, labels map[string]string) {
	t.Helper()
	select {
	case as := <-alerts:
		if len(as) != 1 || string(as[0].Labels["alertname"]) != name {
			t.Fatalf("alert %+v, want %s", as, name)
		}
		for k, v := range labels {
			if got := string(as[0].Labels[model.LabelName(k)]); got != v {
				t.Fatalf("alert %s label %s=%q, want %q (%+v)", name, k, got, v, as[0].Labels)
			}
		}
	case <-time.After(2 * time.Minute): // a hang guard
		t.Fatalf("no %s alert", name)
	}
}

// TestScheduleJobBodyFails: a stored job body that no longer resolves
// (here one the API would refuse) makes the firing "failed", says why in
// the history, and alerts; nothing is queued. On a bbolt file and on
// PostgreSQL.
func TestScheduleJobBodyFails(t *testing.T) {
	forBackends(t, scheduleJobBodyFails)
}

func scheduleJobBodyFails(t *testing.T, open func() store.DB) {
	e, db, clk, ch, alerts := alertEnv(t, open, false)
	sc, err := db.AddSchedule(context.Background(), store.Schedule{Name: "broken", Cron: "0 2 * * *", Job: json.RawMessage(`{"kind":"bench"}`), CatchUp: true, NextFire: at(1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.wakeScheduler()
	clk.Set(at(1, 2))
	waitFire(t, ch, sc.ID, "failed")
	wantAlert(t, alerts, "TunerRunFailed", map[string]string{"schedule": sc.ID, "schedule_name": "broken"})
	fires, err := db.ScheduleFires(context.Background(), sc.ID, 0)
	if err != nil || len(fires) != 1 || fires[0].Outcome != store.FireFailed || !strings.Contains(fires[0].Reason, "needs --matrix FILE or --tier") || fires[0].Job != "" {
		t.Fatalf("history %+v, %v", fires, err)
	}
	if js, err := db.Jobs(context.Background()); err != nil || len(js) != 0 {
		t.Fatalf("jobs %+v, %v; want none", js, err)
	}
}

// deadURL is a loopback URL nothing listens at.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}
