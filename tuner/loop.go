package tuner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Config holds the loop's knobs. Zero budgets mean "no limit"; at least one
// of MaxTrials, Budget and Patience must bound the search.
type Config struct {
	Study    string         // study ID, for messages and the report
	Workload trial.Workload // what every trial drives
	SLO      trial.SLO      // feasibility bounds of the front and the recommendation
	Metrics  Metrics        // objective names
	Default  spaces.Config  // vLLM's default config (trial 0), for the gain
	// Enqueue are known configs (e.g. today's production flags) run as
	// search trials right after vLLM's default, as Optuna's enqueue_trial,
	// and re-measured with it, so the report compares against them. One
	// already finished in the study is not run again.
	Enqueue []spaces.Config

	MaxTrials    int           // finished search trials of the study, resumed ones included
	Budget       time.Duration // wall time of this run, final re-measurement included
	TrialTimeout time.Duration // per trial; 0 = none
	Patience     int           // stop after N search trials without front improvement; 0 = off

	Finalists int // configs re-measured at the end, with vLLM's default
	// Repeats is the number of interleaved rounds of the final
	// re-measurement (rounds.go), on top of the search trials; <= 1 = none
	// (one round cannot tell a gain from noise).
	Repeats int
	MADK    float64 // k of the conservative score median - k*MAD

	Resume bool // continue a study that has trials

	// Screen measures each proposal on a short run first and in full only
	// when promising (screen.go); the zero value measures every one in
	// full.
	Screen Screening

	Progress io.Writer // live progress; nil = none
	Terminal bool      // Progress is a terminal: draw a live bar
	Width    int       // columns of that terminal; 0 = 80
	Logger   *slog.Logger
	// OnStatus receives the status whenever the progress display does (a
	// trial started or finished): the service streams it. nil = none.
	OnStatus func(Status)
	// OnTrial receives each finished or interrupted trial (metrics). nil =
	// none.
	OnTrial func(store.Trial)

	// Shared makes this loop one worker of a study that others serve too
	// (shared.go); nil = the loop owns the study.
	Shared Coordinator
	// Lease is the shared trials' lease (renewed every third of it).
	Lease time.Duration
	// Elapsed is the wall time the study's live workers ran before this
	// one joined: --budget is study-wide.
	Elapsed time.Duration
	// RetryFor bounds the retries of a shared study's database operations
	// (a lost connection) before the worker gives up.
	RetryFor time.Duration
	// SpoolDir keeps a trial's result while it cannot be written.
	SpoolDir string
}

// DefaultConfig returns the loop's defaults: 50 trials, 8 h, 20 min per
// trial, patience 15, the best 3 configs re-measured 3 times, k = 1.
func DefaultConfig() Config {
	return Config{
		Metrics:      DefaultMetrics(),
		MaxTrials:    50,
		Budget:       8 * time.Hour,
		TrialTimeout: 20 * time.Minute,
		Patience:     15,
		Finalists:    3,
		Repeats:      3,
		MADK:         1,
	}
}

// Validate checks the knobs.
func (c *Config) Validate() error {
	switch {
	case c.MaxTrials < 0 || c.Budget < 0 || c.TrialTimeout < 0 || c.Patience < 0:
		return errors.New("tuner: negative budget, timeout or patience")
	case c.MaxTrials == 0 && c.Budget == 0 && c.Patience == 0:
		return errors.New("tuner: unbounded search: set trials, a wall budget or patience")
	case c.Finalists < 0 || c.Repeats < 0 || c.MADK < 0:
		return errors.New("tuner: negative finalists, repeats or MAD multiplier")
	case c.Metrics.Throughput == "" || c.Metrics.Latency == "":
		return errors.New("tuner: objective metrics not set")
	case c.Shared != nil && c.Lease <= 0:
		return errors.New("tuner: a shared study needs a lease")
	}
	if err := c.Screen.Validate(); err != nil {
		return fmt.Errorf("tuner: %w", err)
	}
	return nil
}

// Stop reasons of a Report.
const (
	StopTrials      = "trial budget reached"
	StopBudget      = "wall-time budget reached"
	StopPatience    = "front did not improve"
	StopExhausted   = "search space exhausted"
	StopInterrupted = "interrupted"
	// StopError prefixes the stop reason of a run that an infrastructure
	// error ended (e.g. the database's disk is full): the error follows.
	StopError = "stopped by an error"
)

// Report is the outcome of a run (partial when interrupted).
type Report struct {
	Study        string        `json:"study"`
	StopReason   string        `json:"stop_reason"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	SearchTrials int           `json:"search_trials"` // finished, whole study
	RepeatTrials int           `json:"repeat_trials"` // finished, whole study
	FailedTrials int           `json:"failed_trials"`
	// ScreenedOut counts the search trials that ended after their short
	// run (Config.Screen); they are not in FailedTrials.
	ScreenedOut int         `json:"screened_out,omitempty"`
	RanThisRun  int         `json:"ran_this_run"`
	SLO         trial.SLO   `json:"slo,omitempty"`
	Metrics     Metrics     `json:"metrics"`
	Front       []Candidate `json:"front"`     // feasible, conservative vectors
	Finalists   []Candidate `json:"finalists"` // re-measured configs, best first
	Recommended *Candidate  `json:"recommended,omitempty"`
	Default     *Candidate  `json:"default,omitempty"`
	GainPct     *float64    `json:"gain_pct,omitempty"` // recommended over default, throughput medians
	// Gain is GainPct with its confidence interval from the runs of both.
	Gain *GainEstimate `json:"gain,omitempty"`
	// RecommendedIsDefault says that the pick is vLLM's default config.
	RecommendedIsDefault bool `json:"recommended_is_default,omitempty"`
	// BestMeasured is the faster-looking config when vLLM's default is
	// kept for want of a significant gain (Judge).
	BestMeasured *Candidate `json:"best_measured,omitempty"`
	// Verdict is Judge's one line, as `recommend` repeats it.
	Verdict string `json:"verdict,omitempty"`
	// Remeasure says why the final re-measurement was skipped or cut
	// short ("" when it ran as asked).
	Remeasure string `json:"remeasure,omitempty"`
	// Enqueued are the measured Config.Enqueue configs, each with the
	// recommendation's gain over it.
	Enqueued []Baseline `json:"enqueued,omitempty"`
	// NoFeasible explains why nothing was recommended.
	NoFeasible string `json:"no_feasible,omitempty"`
}

// Baseline is a config the user enqueued, and how the recommendation
// compares with it.
type Baseline struct {
	Candidate
	Gain *GainEstimate `json:"gain,omitempty"` // the recommendation over it
}

// Loop runs one study. It is not safe for concurrent Runs.
type Loop struct {
	cfg    Config
	runner Runner
	prop   Proposer
	store  Store
	log    *slog.Logger

	now func() time.Time // the wall clock; tests drive a fake one

	mu sync.Mutex // guards the fields below (read by the progress ticker)
	st loopState
}

type loopState struct {
	start        time.Time
	trials       []store.Trial
	searchDone   int
	repeatDone   int
	ranThisRun   int
	durs         []time.Duration // finished trials of this run
	lastEnd      time.Time       // when the last finished trial of this run was recorded
	front        [][]float64     // feasible single-trial vectors
	best         float64
	sinceImprove int
	last         string
	phase        Phase
	running      string
	repeatsLeft  int
	repeatBase   int             // repeatDone when this run's re-measurement began
	heldBack     []heldTrial     // pre-health crashes not told yet (broken.go)
	known        map[string]bool // IDs of the ended trials folded in (shared study)
	// remeasureNote says why the final re-measurement was skipped or cut
	// short (Report.Remeasure).
	remeasureNote string
}

// New checks the config and builds a loop over the given parts.
func New(cfg Config, r Runner, p Proposer, s Store) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil || p == nil || s == nil {
		return nil, errors.New("tuner: runner, proposer and store are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Loop{cfg: cfg, runner: r, prop: p, store: s, log: log, now: time.Now}, nil
}

func (l *Loop) status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.st
	st := Status{
		Phase:     s.phase,
		Elapsed:   l.now().Sub(s.start),
		Best:      s.best,
		BestUnit:  l.cfg.Metrics.Throughput,
		FrontSize: len(s.front),
		Last:      s.last,
		Running:   s.running,
		ETA:       -1,
	}
	// N is stable within a phase: the search counts against --trials, the
	// re-measurement against the runs it planned when it began.
	if s.phase == PhaseRepeat {
		st.Done, st.Total = s.repeatDone-s.repeatBase, s.repeatDone-s.repeatBase+s.repeatsLeft
	} else {
		st.Done, st.Total = s.searchDone, l.cfg.MaxTrials
	}
	if mean, ok := s.meanDur(); ok {
		var eta time.Duration = -1
		if st.Total > 0 {
			eta = time.Duration(max(0, st.Total-st.Done)+s.repeatsLeft) * mean
			if s.phase == PhaseRepeat {
				eta = time.Duration(s.repeatsLeft) * mean
			}
		}
		if l.cfg.Budget > 0 {
			left := l.cfg.Budget - st.Elapsed
			if eta < 0 || left < eta {
				eta = max(0, left)
			}
		}
		st.ETA = eta
	}
	return st
}

// meanDur is the wall time per finished trial of this run: the trials
// themselves and the loop's own time between them (asks, surrogate fits,
// store writes), which on a long history is a large share of a virtual
// trial. The ETA and the budget's reserve both count in it.
func (s *loopState) meanDur() (time.Duration, bool) {
	if len(s.durs) == 0 || !s.lastEnd.After(s.start) {
		return 0, false
	}
	return s.lastEnd.Sub(s.start) / time.Duration(len(s.durs)), true
}

// Run runs the study until a budget, patience or the search space ends it,
// re-measures the finalists and returns the report. A cancelled ctx stops
// the running trial (marked interrupted) and returns the partial report with
// ctx.Err().
func (l *Loop) Run(ctx context.Context) (Report, error) {
	l.mu.Lock()
	l.st = loopState{start: l.now().Add(-l.cfg.Elapsed), best: math.NaN(), phase: PhaseSearch, known: map[string]bool{}}
	l.mu.Unlock()

	hist, err := l.store.Trials(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("read study history: %w", err)
	}
	if len(hist) > 0 && !l.cfg.Resume {
		return Report{}, fmt.Errorf("study %s: %d trials: %w", l.cfg.Study, len(hist), ErrStudyExists)
	}
	prog := newProgress(l.cfg.Progress, l.cfg.Terminal, l.cfg.Width, l.status)
	if l.cfg.OnStatus != nil {
		prog = hookProgress{progress: prog, hook: l.cfg.OnStatus}
	}
	defer prog.close()

	var reason string
	if l.cfg.Shared != nil {
		if _, err = l.sync(ctx, prog, false); err == nil {
			reason, err = l.searchShared(ctx, prog)
		}
		if err == nil {
			err = l.remeasureShared(ctx, prog)
		}
	} else {
		rerun := l.replay(hist)
		reason, err = l.search(ctx, prog, rerun)
		if err == nil {
			err = l.remeasure(ctx, prog)
		}
	}
	switch {
	case err != nil && ctx.Err() != nil:
		reason = StopInterrupted
	case err != nil:
		reason = fmt.Sprintf("%s: %v", StopError, err)
	}
	rep := l.report(reason)
	return rep, err
}

// replay loads the history: finished search trials are told to the proposer
// and counted; interrupted search trials whose config never finished are
// returned for a re-run (once each).
func (l *Loop) replay(hist []store.Trial) []store.Trial {
	finished := map[string]bool{}
	for i := range hist {
		t := &hist[i]
		t.ConfigID = t.ConfigKey()
		if t.State.Measured() {
			finished[t.ConfigID] = true
		}
	}
	var rerun []store.Trial
	queued := map[string]bool{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range hist {
		t := hist[i]
		l.st.trials = append(l.st.trials, t)
		switch {
		case t.State.Measured() && t.Repeat > 0:
			l.st.repeatDone++
		case t.State.Measured():
			l.st.searchDone++
			l.prop.Tell(t.Config, told(t.Result))
			l.updateFront(&t)
			l.st.last = fmt.Sprintf("#%d %s", t.Seq, t.Verdict())
		case t.Repeat == 0 && !finished[t.ConfigID] && !queued[t.ConfigID]:
			queued[t.ConfigID] = true
			rerun = append(rerun, t)
		}
	}
	if len(hist) > 0 {
		l.log.Info("resuming study", "study", l.cfg.Study, "search_trials", l.st.searchDone,
			"repeat_trials", l.st.repeatDone, "rerun", len(rerun))
	}
	return rerun
}

// updateFront adds a finished search trial to the running front and
// tracks patience. Caller holds mu.
func (l *Loop) updateFront(t *store.Trial) {
	l.st.sinceImprove++
	v, ok := l.cfg.Metrics.Vector(t.Result)
	if !ok {
		return
	}
	if pm := t.Result.Metrics(); pm == nil {
		return
	} else if met, _ := l.cfg.SLO.Check(pm); !met {
		return
	}
	if math.IsNaN(l.st.best) || v[0] > l.st.best {
		l.st.best = v[0]
	}
	add, drop := pareto.Insert(l.st.front, v, l.cfg.Metrics.Objectives().Directions())
	if !add {
		return
	}
	slices.Sort(drop)
	for i := len(drop) - 1; i >= 0; i-- {
		l.st.front = slices.Delete(l.st.front, drop[i], drop[i]+1)
	}
	l.st.front = append(l.st.front, v)
	l.st.sinceImprove = 0
}

// search runs search trials until a stop condition.
func (l *Loop) search(ctx context.Context, prog progress, rerun []store.Trial) (string, error) {
	seen := map[string]*store.Trial{}
	for i := range l.st.trials {
		t := &l.st.trials[i]
		if t.State.Measured() && t.Repeat == 0 {
			seen[t.ConfigID] = t
		}
	}
	var queue []spaces.Config // Config.Enqueue still to run
	for _, c := range l.cfg.Enqueue {
		if _, ok := seen[c.ID()]; !ok && !slices.ContainsFunc(rerun, func(t store.Trial) bool { return t.ConfigID == c.ID() }) {
			queue = append(queue, c)
		}
	}
	dups := 0
	for {
		if err := ctx.Err(); err != nil {
			return StopInterrupted, err
		}
		if reason, stop := l.shouldStop(0); stop {
			return reason, nil
		}
		var cfg spaces.Config
		fromAsk := false
		l.mu.Lock()
		afterDefault := l.st.searchDone > 0 || l.cfg.Default.Len() == 0
		l.mu.Unlock()
		if len(rerun) > 0 {
			cfg, rerun = rerun[0].Config, rerun[1:]
		} else if len(queue) > 0 && afterDefault { // trial 0 stays vLLM's default
			cfg, queue = queue[0], queue[1:]
			if _, ok := seen[cfg.ID()]; ok {
				continue
			}
		} else {
			c, err := l.prop.Ask(ctx)
			switch {
			case ctx.Err() != nil:
				return StopInterrupted, ctx.Err()
			case errors.Is(err, ErrSpaceExhausted):
				return StopExhausted, nil
			case err != nil:
				return "", fmt.Errorf("propose: %w", err)
			}
			cfg, fromAsk = c, true
		}
		if prev, ok := seen[cfg.ID()]; ok && fromAsk {
			// Never run a config twice in the search: teach the proposer
			// the known result instead.
			l.log.Debug("proposer repeated a config; told it the known result", "config", cfg.ID(), "trial", prev.Seq)
			l.prop.Tell(cfg, told(prev.Result))
			if dups++; dups >= 100 {
				return StopExhausted, nil
			}
			continue
		}
		dups = 0
		t, err := l.runOne(ctx, prog, cfg, 0)
		if err != nil {
			return "", err
		}
		seen[t.ConfigID] = &t
	}
}

// shouldStop checks the budgets before the next search trial; inflight
// search trials of other workers count against --trials.
func (l *Loop) shouldStop(inflight int) (string, bool) {
	l.mu.Lock()
	s := &l.st
	searchDone, sinceImprove, elapsed := s.searchDone, s.sinceImprove, l.now().Sub(s.start)
	mean, haveMean := s.meanDur()
	trials := slices.Clone(s.trials)
	l.mu.Unlock()
	if l.cfg.MaxTrials > 0 && searchDone+inflight >= l.cfg.MaxTrials {
		return StopTrials, true
	}
	if l.cfg.Patience > 0 && searchDone > 0 && sinceImprove >= l.cfg.Patience {
		return StopPatience, true
	}
	if l.cfg.Budget > 0 {
		if elapsed >= l.cfg.Budget {
			return StopBudget, true
		}
		// Keep room for the next trial and the final re-measurement of the
		// finalists that exist (and of the next trial, should it become one).
		if haveMean && elapsed+time.Duration(1+l.repeatReserve(trials))*mean > l.cfg.Budget {
			return StopBudget, true
		}
	}
	return "", false
}

// runOne stores a running record, runs the trial and stores its end. The
// error is non-nil only for infrastructure failures and cancellation.
func (l *Loop) runOne(ctx context.Context, prog progress, cfg spaces.Config, repeat int) (store.Trial, error) {
	if err := ctx.Err(); err != nil { // never start an engine after cancellation
		return store.Trial{}, err
	}
	begin := store.Trial{Repeat: repeat, State: store.StateRunning, Config: cfg, ConfigID: cfg.ID(), Started: l.now()}
	phase := phaseOf(begin)
	var rec store.Trial
	var err error
	if l.cfg.Shared != nil {
		err = l.retry(ctx, "claim trial", func(ctx context.Context) error {
			rec, err = l.cfg.Shared.Claim(ctx, begin, l.cfg.MaxTrials)
			return err
		}, ErrClaimed, ErrTrialBudget)
		if errors.Is(err, ErrClaimed) || errors.Is(err, ErrTrialBudget) {
			return store.Trial{}, err
		}
	} else {
		rec, err = l.store.Begin(ctx, begin)
	}
	if err != nil {
		return store.Trial{}, fmt.Errorf("store trial start: %w", err)
	}
	l.mu.Lock()
	l.st.phase, l.st.running = phase, rec.ConfigID
	l.mu.Unlock()
	prog.started(l.status())
	l.log.Info("trial start", "trial", rec.Seq, "phase", phase, "config", rec.ConfigID, "flags", cfg.Flags(), "worker", rec.Worker)

	tctx, cancel := ctx, context.CancelFunc(func() {})
	if l.cfg.TrialTimeout > 0 {
		tctx, cancel = context.WithTimeout(ctx, l.cfg.TrialTimeout)
	}
	var lost func() error // the cause when the lease was lost
	if l.cfg.Shared != nil {
		lctx, lcancel := context.WithCancelCause(tctx)
		hctx, hstop := context.WithCancel(lctx)
		done := make(chan struct{})
		go func() { defer close(done); l.heartbeat(hctx, rec, lcancel) }()
		tctx = lctx
		prev := cancel
		cancel = func() { hstop(); <-done; lcancel(nil); prev() }
		lost = func() error {
			if c := context.Cause(lctx); errors.Is(c, ErrLeaseLost) {
				return c
			}
			return nil
		}
	}
	res, runErr := l.measure(tctx, cfg, phase == PhaseSearch && l.screens(cfg))
	var leaseErr error
	if lost != nil && ctx.Err() == nil {
		leaseErr = lost()
	}
	timedOut := tctx.Err() != nil && ctx.Err() == nil && leaseErr == nil
	cancel()

	rec.Ended = l.now()
	var fatal error
	switch {
	case ctx.Err() != nil:
		res.Status, res.Failure = trial.StatusFailed, trial.FailInterrupted
		if res.Error == "" {
			res.Error = ctx.Err().Error()
		}
		fatal = ctx.Err()
	case leaseErr != nil:
		res.Status, res.Failure = trial.StatusFailed, trial.FailInterrupted
		res.Error = leaseErr.Error()
		fatal = leaseErr
	case timedOut:
		res.Status, res.Failure = trial.StatusFailed, FailTrialTimeout
		res.Error = fmt.Sprintf("trial ran past %s", l.cfg.TrialTimeout)
	case runErr != nil:
		res.Status, res.Failure = trial.StatusFailed, trial.FailInterrupted
		res.Error = runErr.Error()
		fatal = fmt.Errorf("run trial %d: %w", rec.Seq, runErr)
	}
	if res.ConfigID == "" {
		res.ConfigID = rec.ConfigID
	}
	if res.Config.Len() == 0 {
		res.Config = cfg
	}
	if fatal == nil {
		fatal = l.checkBroken(cfg, phase, &res)
	}
	rec.Result = &res
	rec.State = store.StateOf(&res)
	// The end of the trial is written even when ctx is cancelled.
	if l.cfg.Shared != nil {
		err = l.finishShared(context.WithoutCancel(ctx), rec)
		if errors.Is(err, store.ErrState) {
			// Taken back (its lease ran out, say while the database was
			// away) and marked interrupted by another worker's reaper: the
			// config is free for whoever claims it next. The result is
			// stale; this worker goes on with the next trial.
			if leaseErr == nil {
				l.log.Warn("trial taken back by another worker; dropping its result", "trial", rec.Seq, "config", rec.ConfigID)
			}
			return rec, fmt.Errorf("trial %d: %w", rec.Seq, ErrLeaseLost)
		}
	} else {
		err = l.store.Finish(context.WithoutCancel(ctx), rec)
	}
	if err != nil {
		return rec, errors.Join(fatal, fmt.Errorf("store trial end: %w", err))
	}
	if rec.State == store.StateInterrupted {
		l.log.Warn("trial interrupted", "trial", rec.Seq, "config", rec.ConfigID)
		l.record(prog, rec)
		if fatal == nil {
			fatal = errors.New("trial interrupted")
		}
		return rec, fatal
	}
	if phase == PhaseSearch {
		l.tell(cfg, &res)
	}
	l.record(prog, rec)
	l.log.Info("trial end", "trial", rec.Seq, "verdict", rec.Verdict(), "seconds", rec.Ended.Sub(rec.Started).Seconds())
	return rec, fatal
}

// record folds a finished (or interrupted) trial into the state and shows it.
func (l *Loop) record(prog progress, t store.Trial) {
	l.mu.Lock()
	if t.ID != "" && l.st.known[t.ID] { // taken back and folded in by sync already
		l.mu.Unlock()
		return
	}
	if l.st.known != nil {
		l.st.known[t.ID] = true
	}
	l.st.trials = append(l.st.trials, t)
	l.st.running = ""
	if t.State.Measured() {
		l.st.ranThisRun++
		l.st.durs = append(l.st.durs, t.Ended.Sub(t.Started))
		l.st.lastEnd = l.now()
		if t.Repeat > 0 {
			l.st.repeatDone++
			l.st.repeatsLeft = max(0, l.st.repeatsLeft-1)
		} else {
			l.st.searchDone++
			l.updateFront(&t)
		}
	}
	l.st.last = fmt.Sprintf("#%d %s", t.Seq, t.Verdict())
	l.mu.Unlock()
	prog.finished(l.status(), l.trialLine(&t))
	if l.cfg.OnTrial != nil {
		l.cfg.OnTrial(t)
	}
}

// trialLine is the one-line summary of a trial.
func (l *Loop) trialLine(t *store.Trial) string {
	s := fmt.Sprintf("trial #%d [%s] %s %-14s", t.Seq, phaseOf(*t), t.ConfigID, t.Verdict())
	if v, ok := l.cfg.Metrics.Vector(t.Result); ok {
		est := ""
		if t.Result.VRAMSource == VRAMEstimate {
			est = "~" // estimated from --gpu-memory-utilization
		}
		s += fmt.Sprintf(" %s=%.1f %s=%.1fms vram=%s%.1fGiB", l.cfg.Metrics.Throughput, v[0], l.cfg.Metrics.Latency, v[1], est, v[2])
		if pm := t.Result.Metrics(); pm != nil && len(l.cfg.SLO) > 0 {
			if met, bad := l.cfg.SLO.Check(pm); met {
				s += " slo=met"
			} else {
				s += fmt.Sprintf(" slo=missed(%d)", len(bad))
			}
		}
	} else if t.Result != nil && t.Result.Error != "" {
		s += " " + firstLine(t.Result.Error, 100)
	}
	if sc := t.Result; sc != nil && sc.Screen != nil && sc.Screen.Promoted {
		s += fmt.Sprintf(" after a short run (%s)", sc.Screen.Reason)
	}
	s += fmt.Sprintf(" (%s)", fmtDur(t.Ended.Sub(t.Started)))
	if t.Worker != "" {
		s += " by " + t.Worker
	}
	return s
}

func firstLine(s string, n int) string {
	for i, r := range s {
		if r == '\n' {
			s = s[:i]
			break
		}
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// remeasurePlan is what the final re-measurement runs: the finalists, and
// vLLM's default when it has a usable measurement (so the gain compares
// medians).
func (l *Loop) remeasurePlan(trials []store.Trial) []Candidate {
	cands := Aggregate(trials, l.cfg.SLO, l.cfg.Metrics, l.cfg.MADK)
	fin := finalistsOf(trials, l.cfg)
	base := []string{l.cfg.Default.ID()}
	for _, c := range l.cfg.Enqueue {
		base = append(base, c.ID())
	}
	for _, c := range cands {
		if slices.Contains(base, c.ConfigID) && len(c.Trials) > 0 && !slices.ContainsFunc(fin, func(f Candidate) bool { return f.ConfigID == c.ConfigID }) {
			fin = append(fin, c)
		}
	}
	return fin
}

// finalistsOf are the best feasible candidates by conservative score of the
// search trials' single measurements, returned with all their measurements
// so far. Re-measurements do not move a config in or out of the set: they
// would change it after every final re-measurement, and each --resume of a
// finished study would re-measure a new finalist.
func finalistsOf(trials []store.Trial, cfg Config) []Candidate {
	var search []store.Trial
	for _, t := range trials {
		if t.Repeat == 0 {
			search = append(search, t)
		}
	}
	all := map[string]Candidate{}
	for _, c := range Aggregate(trials, cfg.SLO, cfg.Metrics, cfg.MADK) {
		all[c.ConfigID] = c
	}
	var feas []Candidate
	for _, c := range Aggregate(search, cfg.SLO, cfg.Metrics, cfg.MADK) {
		if c.Feasible {
			c.Trials, c.Failed = all[c.ConfigID].Trials, all[c.ConfigID].Failed
			feas = append(feas, c)
		}
	}
	slices.SortStableFunc(feas, func(a, b Candidate) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(feas) > cfg.Finalists {
		feas = feas[:cfg.Finalists]
	}
	return feas
}

// report builds the Report from everything stored so far.
func (l *Loop) report(reason string) Report {
	l.mu.Lock()
	trials := slices.Clone(l.st.trials)
	rep := Report{
		Study: l.cfg.Study, StopReason: reason, Elapsed: l.now().Sub(l.st.start),
		SearchTrials: l.st.searchDone, RepeatTrials: l.st.repeatDone, RanThisRun: l.st.ranThisRun,
		SLO: l.cfg.SLO, Metrics: l.cfg.Metrics,
	}
	l.mu.Unlock()
	for _, t := range trials {
		switch {
		case t.Result != nil && t.Result.Failure == trial.FailScreenedOut:
			rep.ScreenedOut++
		case t.State == store.StateFailed:
			rep.FailedTrials++
		}
	}
	cands := Aggregate(trials, l.cfg.SLO, l.cfg.Metrics, l.cfg.MADK)
	for _, i := range Front(cands, l.cfg.Metrics) {
		rep.Front = append(rep.Front, cands[i])
	}
	slices.SortStableFunc(rep.Front, func(a, b Candidate) int { return cmp.Compare(b.Score, a.Score) })
	repeated := map[string]bool{}
	for _, t := range trials {
		if t.Repeat > 0 {
			repeated[t.ConfigID] = true
		}
	}
	for _, c := range cands {
		if repeated[c.ConfigID] {
			rep.Finalists = append(rep.Finalists, c)
		}
	}
	slices.SortStableFunc(rep.Finalists, func(a, b Candidate) int {
		if a.Score > b.Score {
			return -1
		} else if a.Score < b.Score {
			return 1
		}
		return 0
	})
	defID := l.cfg.Default.ID()
	for i := range cands {
		// A default that never ran (vLLM refuses it for this workload,
		// e.g. a LoRA adapter above its max_lora_rank) has no figures to
		// compare with: NaN, which JSON cannot carry.
		if l.cfg.Default.Len() > 0 && cands[i].ConfigID == defID && len(cands[i].Trials) > 0 {
			c := cands[i]
			rep.Default = &c
		}
	}
	// As `tuner recommend` judges (the same function).
	v := Judge(JudgeInput{Cands: cands, DefaultID: defID, Metrics: l.cfg.Metrics, SLO: l.cfg.SLO, Prefer: PreferThroughput})
	rep.Verdict = v.Text
	if v.Err != nil {
		rep.NoFeasible = v.Err.Error()
	} else {
		c := *v.Pick
		rep.Recommended, rep.Gain, rep.BestMeasured = &c, v.Gain, v.BestMeasured
		if v.Gain != nil {
			rep.GainPct = &v.Gain.Pct
		}
		rep.RecommendedIsDefault = v.IsDefault
	}
	l.mu.Lock()
	rep.Remeasure = l.st.remeasureNote
	l.mu.Unlock()
	for _, e := range l.cfg.Enqueue {
		for i := range cands {
			if cands[i].ConfigID != e.ID() || len(cands[i].Trials)+cands[i].Failed == 0 {
				continue
			}
			b := Baseline{Candidate: cands[i]}
			if g, ok := EstimateGain(rep.Recommended, &cands[i]); ok && rep.Recommended.ConfigID != e.ID() {
				b.Gain = &g
			}
			rep.Enqueued = append(rep.Enqueued, b)
		}
	}
	return rep
}
