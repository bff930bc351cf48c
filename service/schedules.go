package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// Clock is the scheduler's time: the system clock, or a fake one in tests.
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once the clock reaches t, and a
	// function that releases it.
	At(t time.Time) (<-chan time.Time, func())
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) At(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}

// retryPass is how long the scheduler waits after a pass that could not
// read the database.
const retryPass = 30 * time.Second

// parseCron reads a schedule's cron expression: five fields (minute hour
// day-of-month month day-of-week) or a descriptor (@hourly, @daily,
// @weekly, @monthly, @yearly, @every 90m, and tuner's @nightly for
// 02:00 daily), in loc unless it starts with CRON_TZ=Zone.
func parseCron(expr string, loc *time.Location) (cron.Schedule, error) {
	e := strings.TrimSpace(expr)
	if e == "@nightly" {
		e = "0 2 * * *"
	}
	if loc != nil && !strings.HasPrefix(e, "CRON_TZ=") && !strings.HasPrefix(e, "TZ=") {
		e = "CRON_TZ=" + loc.String() + " " + e
	}
	return cron.ParseStandard(e)
}

// scheduler fires the schedules whose time has come, then sleeps until the
// next one is due (or an edit wakes it), until ctx ends. Slots that passed
// while the service was down (before it started) fire once, as a
// catch-up, or are recorded as missed where catch_up is off.
func (s *Server) scheduler(ctx context.Context) error {
	s.started = s.clock.Now()
	for {
		next, err := s.schedulePass(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Error("schedules", "err", err)
			next = s.clock.Now().Add(retryPass)
		}
		var due <-chan time.Time
		release := func() {}
		if !next.IsZero() {
			due, release = s.clock.At(next)
		}
		select {
		case <-ctx.Done():
			release()
			return nil
		case <-s.schedWake:
		case <-due:
		}
		release()
	}
}

// wakeScheduler makes the scheduler read the schedules again (one was
// added, edited, paused or resumed).
func (s *Server) wakeScheduler() {
	select {
	case s.schedWake <- struct{}{}:
	default:
	}
}

// schedulePass fires every due schedule and returns when the next one is
// due (zero: none is).
func (s *Server) schedulePass(ctx context.Context) (time.Time, error) {
	list, err := s.db.Schedules(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var earliest time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
			earliest = t
		}
	}
	for _, sc := range list {
		if sc.Paused || sc.NextFire.IsZero() {
			continue
		}
		now := s.clock.Now()
		if sc.NextFire.After(now) {
			soonest(sc.NextFire)
			continue
		}
		next, err := s.fire(ctx, sc, now)
		if err != nil {
			return time.Time{}, err
		}
		soonest(next)
	}
	return earliest, nil
}

// fire records one firing of sc at now (its slot sc.NextFire has come)
// and returns the schedule's next fire time.
func (s *Server) fire(ctx context.Context, sc store.Schedule, now time.Time) (time.Time, error) {
	log := s.log.With("schedule", sc.ID, "name", sc.Name)
	f := store.ScheduleFire{Slot: sc.NextFire, Time: now.UTC()}
	var next time.Time
	c, err := parseCron(sc.Cron, s.cfg.Location)
	if err == nil {
		next = c.Next(now).UTC()
	}
	var job *store.Job
	missedWhileDown := sc.NextFire.Before(s.started)
	f.CatchUp = missedWhileDown
	switch {
	case err != nil:
		// Stored expressions were parsed when saved; a time zone that has
		// gone from the system fails here. The schedule stops firing.
		f.Outcome, f.Reason = store.FireFailed, fmt.Sprintf("cron %q: %v (the schedule stops until it is edited)", sc.Cron, err)
	case missedWhileDown && !sc.CatchUp:
		f.Outcome, f.Reason = store.FireMissed, missedText(c, sc.NextFire, now)+"; catch_up is off"
	default:
		if busy := s.busyJob(ctx, sc.LastJob); busy != "" {
			f.Outcome, f.Reason = store.FireSkipped, busy
			break
		}
		j, err := s.newJob(ctx, sc.Job, sc.ID)
		if err != nil {
			f.Outcome, f.Reason = store.FireFailed, err.Error() // "job body: ..."
			break
		}
		job, f.Outcome = &j, store.FireQueued
		if missedWhileDown {
			f.Reason = missedText(c, sc.NextFire, now) + "; run once now (catch-up)"
		}
	}
	// The firing's event goes out before a worker can claim its job
	// (claim takes s.mu): published after, a bench job that failed at once
	// had its "failed" before its "queued", and the hub then replayed it
	// as queued to every client that connected later.
	s.mu.Lock()
	f, err = s.db.FireSchedule(ctx, sc.ID, f, next, job)
	if err == nil {
		// Counted before the event goes out: a client that saw the firing
		// and then read /metrics found the counter one short (the service
		// test, under load).
		s.metrics.firings.WithLabelValues(sc.Name, string(f.Outcome)).Inc()
		ev := Event{Job: f.Job, Schedule: sc.ID, Line: fmt.Sprintf("schedule %s fired for %s: %s", sc.Name, f.Slot.Format(time.RFC3339), f.Outcome)}
		if f.Reason != "" {
			ev.Line += " (" + f.Reason + ")"
		}
		if f.Job != "" {
			ev.State = store.JobQueued
			s.refreshQueue(ctx)
		}
		s.hub.publish(ev)
	}
	s.mu.Unlock()
	if errors.Is(err, store.ErrClaimed) {
		// Edited, paused or fired by another service meanwhile: read it
		// again at once.
		log.Info("schedule firing lost", "err", err)
		return now, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	if f.Job != "" {
		s.poke()
	}
	log.Info("schedule fired", "slot", f.Slot, "outcome", f.Outcome, "job", f.Job, "catch_up", f.CatchUp, "reason", f.Reason)
	if f.Outcome == store.FireFailed {
		s.sendAlert(alert.Event{Kind: alert.KindRunFailed, Severity: "warning", Summary: fmt.Sprintf("schedule %s could not queue its job: %s", sc.Name, f.Reason),
			Labels: map[string]string{"schedule": sc.ID, "schedule_name": sc.Name}})
	}
	return next, nil
}

// missedText says how many slots of c passed from first to now.
func missedText(c cron.Schedule, first, now time.Time) string {
	n := 1
	for t := c.Next(first); !t.IsZero() && !t.After(now) && n < 10000; t = c.Next(t) {
		n++
	}
	return fmt.Sprintf("%d run(s) due while the service was down, the first at %s", n, first.UTC().Format(time.RFC3339))
}

// busyJob says why a schedule's last job blocks a new firing ("": it
// does not: at most one run per schedule at a time).
func (s *Server) busyJob(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	j, err := s.db.Job(ctx, id)
	if err != nil || j.State.Finished() {
		return ""
	}
	return fmt.Sprintf("the previous job %s is still %s", j.ID, j.State)
}

// newJob reads a job body as POST /api/v1/jobs does and returns the job
// to queue; a schedule's benchmark runs are labelled schedule=<ID>, so
// that its history and trend are its runs.
func (s *Server) newJob(ctx context.Context, body []byte, schedule string) (store.Job, error) {
	kind, spec, err := s.parseJob(ctx, body)
	if err != nil {
		return store.Job{}, err
	}
	if b, ok := spec.(tuner.BenchSpec); ok && schedule != "" {
		b.Labels = append(b.Labels, "schedule="+schedule) // the last of a key wins
		spec = b
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return store.Job{}, err
	}
	return store.Job{Kind: kind, Spec: raw, State: store.JobQueued, GPUSet: -1, Schedule: schedule}, nil
}

// scheduledEnd is what a scheduled job's end adds: the regression gate on
// each benchmark run against the schedule's previous run of its model
// (kept in j.Gates, shown on /metrics), and an alert for a regression or
// a failed run.
func (s *Server) scheduledEnd(ctx context.Context, j *store.Job, jobErr error) {
	labels := map[string]string{"schedule": j.Schedule, "job": j.ID}
	sc, err := s.db.Schedule(ctx, j.Schedule)
	if err == nil {
		labels["schedule_name"] = sc.Name
	}
	switch {
	case j.State == store.JobFailed:
		s.sendAlert(alert.Event{Kind: alert.KindRunFailed, Severity: "warning", Labels: labels,
			Summary: fmt.Sprintf("scheduled %s job %s failed: %s", j.Kind, j.ID, j.Error)})
		if errors.Is(jobErr, tuner.ErrEngineBroken) {
			s.sendAlert(alert.Event{Kind: alert.KindEngineBroken, Severity: "critical", Labels: labels, Summary: j.Error})
		}
	case j.State == store.JobDone && j.Kind == KindBench:
		gs := tuner.DefaultGateSpec()
		if err == nil && len(sc.Gate) > 0 {
			_ = json.Unmarshal(sc.Gate, &gs) // validated when the schedule was saved
		}
		for _, id := range j.BenchRuns {
			g := s.gateRun(ctx, j.Schedule, id, gs)
			j.Gates = append(j.Gates, g)
			if g.Verdict == alert.GateRegression {
				l := map[string]string{"run": g.Run, "base_run": g.Base, "model": g.Model}
				for k, v := range labels {
					l[k] = v
				}
				s.sendAlert(alert.Event{Kind: alert.KindRegression, Severity: "critical", Labels: l,
					Summary: fmt.Sprintf("scheduled benchmark %s: %s", g.Run, g.Summary)})
			}
		}
	}
}

// gateRun compares run id with the schedule's previous finished run of
// its model.
func (s *Server) gateRun(ctx context.Context, schedule, id string, gs tuner.GateSpec) store.JobGate {
	g := store.JobGate{Run: id, Verdict: "none"}
	next, err := s.db.Run(ctx, id)
	if err != nil {
		g.Summary = err.Error()
		return g
	}
	g.Model = next.Model
	if next.State != store.RunOK {
		g.Summary = fmt.Sprintf("run %s is %s: not gated", id, next.State)
		return g
	}
	base, ok, err := tuner.PreviousRun(ctx, s.db, store.RunFilter{Model: next.Model, Labels: map[string]string{"schedule": schedule}}, next)
	switch {
	case err != nil:
		g.Summary = err.Error()
		return g
	case !ok:
		g.Summary = "the schedule's first finished run of " + next.Model + ": nothing to compare with"
		return g
	}
	g.Base = base.ID
	cmp, err := tuner.CompareRuns(ctx, s.db, tuner.CompareSpec{Base: base.ID, New: id, Gate: gs})
	if err != nil && (cmp == nil || cmp.Report == nil) {
		g.Summary = err.Error()
		return g
	}
	rep := cmp.Report
	s.metrics.gate.Observe(rep, s.clock.Now())
	g.Verdict, g.Regressions = alert.GateOutcome(rep), rep.Regressions
	g.Summary = fmt.Sprintf("%s against %s: %d regressed, %d improved, %d unchanged, %d inconclusive, %d untestable",
		g.Verdict, base.ID, rep.Regressions, rep.Improvements, rep.Unchanged, rep.Inconclusive, rep.Untestable)
	return g
}

// sendAlert delivers ev to the configured webhook in the background (its
// retries must not hold a job worker); without a webhook it only logs.
func (s *Server) sendAlert(ev alert.Event) {
	if ev.Time.IsZero() {
		ev.Time = s.clock.Now()
	}
	if ev.Source == "" {
		ev.Source = "tuner serve"
	}
	s.log.Warn("alert", "kind", ev.Kind, "summary", ev.Summary)
	if s.cfg.Alerts == nil {
		return
	}
	s.alerts.Add(1)
	go func() {
		defer s.alerts.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := s.cfg.Alerts.Send(ctx, ev); err != nil {
			s.log.Error("alert not delivered", "kind", ev.Kind, "err", err)
		}
	}()
}
