package tuner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// Several workers on one study (a PostgreSQL database): each runs the same
// loop; the Coordinator turns "begin a trial" into a lease that the store
// grants once per config (and re-measurement index), the loop renews the
// lease while the trial runs, reads the others' trials before each decision
// (budgets, patience and the re-measurement plan are study-wide), tells the
// proposer the configs in flight elsewhere, and waits for them before it
// re-measures and before it exits.

// DefaultLease is how long a shared study's trial stays claimed without a
// heartbeat (renewed every third of it).
const DefaultLease = 30 * time.Second

// Errors of a shared study that the loop recovers from.
var (
	// ErrClaimed: another worker runs or ran the config; pick another.
	ErrClaimed = store.ErrClaimed
	// ErrLeaseLost: the trial's lease expired and was taken back.
	ErrLeaseLost = store.ErrLeaseLost
	// ErrTrialBudget: the study's --trials are running or done.
	ErrTrialBudget = store.ErrTrialBudget
)

// Coordinator shares a study between workers; Config.Shared nil means the
// loop owns its study alone (bbolt's study lock).
type Coordinator interface {
	// Claim begins t leased to this worker, or fails with ErrClaimed, or
	// with ErrTrialBudget for a search trial beyond maxSearch (0: none).
	Claim(ctx context.Context, t store.Trial, maxSearch int) (store.Trial, error)
	// Heartbeat renews this worker and, when t.ID is set, t's lease;
	// ErrLeaseLost when it was taken back.
	Heartbeat(ctx context.Context, t store.Trial) error
	// Reap takes back the trials whose lease expired (marked interrupted).
	Reap(ctx context.Context) error
}

// SharedStudy is the Coordinator over one study of a database.
type SharedStudy struct {
	DB     store.DB
	Study  string
	Worker string
	Lease  time.Duration
}

var _ Coordinator = SharedStudy{}

func (s SharedStudy) Claim(ctx context.Context, t store.Trial, maxSearch int) (store.Trial, error) {
	return s.DB.ClaimTrial(ctx, s.Study, t.Config, store.ClaimOptions{Repeat: t.Repeat, Worker: s.Worker, Lease: s.Lease, MaxSearch: maxSearch})
}

func (s SharedStudy) Heartbeat(ctx context.Context, t store.Trial) error {
	return s.DB.Heartbeat(ctx, s.Study, s.Worker, t.ID, s.Lease)
}

func (s SharedStudy) Reap(ctx context.Context) error {
	_, err := s.DB.ReapExpired(ctx, s.Study)
	return err
}

// DefaultWorkerName is hostname:pid.
func DefaultWorkerName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}

// joinShared registers this process as a worker of the study and returns
// the coordinator, the time since the study's earliest live worker joined,
// and whether other workers are live (joining them needs no --resume).
func (ss *Search) joinShared(ctx context.Context, db store.DB, studyID string) (SharedStudy, store.Membership, error) {
	name := ss.Spec.Worker
	if name == "" {
		name = DefaultWorkerName()
	}
	lease := ss.Spec.Lease.Std()
	if lease <= 0 {
		lease = DefaultLease
	}
	spec := ss.Spec
	spec.Worker, spec.Resume, spec.NewStudy, spec.DryRun = "", false, false, false
	blob, err := json.Marshal(spec)
	if err != nil {
		return SharedStudy{}, store.Membership{}, err
	}
	m, err := db.JoinStudy(ctx, studyID, name, lease, blob)
	if errors.Is(err, store.ErrWorkerName) {
		return SharedStudy{}, m, Usagef("--worker-name %s: %v", name, err)
	}
	if err != nil {
		return SharedStudy{}, m, err
	}
	return SharedStudy{DB: db, Study: studyID, Worker: name, Lease: lease}, m, nil
}

// pendingSetter is a proposer that can be told the configs in flight on
// other workers (search.Proposer.SetPending).
type pendingSetter interface{ SetPending([]spaces.Config) }

// pollEvery is how often a waiting worker looks at the study again.
func (l *Loop) pollEvery() time.Duration {
	return min(max(l.cfg.Lease/6, 50*time.Millisecond), 5*time.Second)
}

// wait sleeps one poll interval (renewing this worker's membership).
func (l *Loop) wait(ctx context.Context) error {
	if err := l.cfg.Shared.Heartbeat(ctx, store.Trial{}); err != nil && ctx.Err() == nil {
		l.log.Warn("heartbeat failed", "err", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(l.pollEvery()):
		return nil
	}
}

// retry runs fn until it succeeds, with backoff from 100 ms to 10 s, for at
// most Config.RetryFor; a connection lost for a moment does not end a
// worker. Errors that retrying cannot fix (is) end it at once.
func (l *Loop) retry(ctx context.Context, what string, fn func(context.Context) error, is ...error) error {
	deadline := l.now().Add(l.cfg.RetryFor)
	back := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || ctx.Err() != nil || isAny(err, is...) || !l.now().Before(deadline) {
			return err
		}
		l.log.Warn(what+" failed; retrying", "err", err, "in", back)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(back):
		}
		back = min(2*back, l.maxBackoff())
	}
}

// maxBackoff caps retry's waits at 10 s, and at a third of a shared
// study's lease: after an outage of the database the worker is back within
// the lease that the server's restart gives its trial again, so the first
// other worker back does not take its kept result's trial away.
func (l *Loop) maxBackoff() time.Duration {
	if l.cfg.Lease <= 0 {
		return 10 * time.Second
	}
	return min(max(l.cfg.Lease/3, 100*time.Millisecond), 10*time.Second)
}

// sync takes back expired leases, reads the study and folds in the trials
// that ended since the last sync (other workers' among them: counted,
// told to the proposer, shown). It returns the trials running now.
func (l *Loop) sync(ctx context.Context, prog progress, show bool) ([]store.Trial, error) {
	var hist []store.Trial
	err := l.retry(ctx, "read the study", func(ctx context.Context) error {
		if err := l.cfg.Shared.Reap(ctx); err != nil {
			return err
		}
		var err error
		hist, err = l.store.Trials(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read study history: %w", err)
	}
	var running []store.Trial
	for i := range hist {
		t := hist[i]
		t.ConfigID = t.ConfigKey()
		if t.State == store.StateRunning {
			running = append(running, t)
			continue
		}
		l.mu.Lock()
		known := l.st.known[t.ID]
		if !known {
			l.st.known[t.ID] = true
			l.st.trials = append(l.st.trials, t)
			switch {
			case t.State.Measured() && t.Repeat > 0:
				l.st.repeatDone++
				l.st.repeatsLeft = max(0, l.st.repeatsLeft-1)
			case t.State.Measured():
				l.st.searchDone++
				l.prop.Tell(t.Config, told(t.Result))
				l.updateFront(&t)
			}
			l.st.last = fmt.Sprintf("#%d %s", t.Seq, t.Verdict())
		}
		l.mu.Unlock()
		if !known && show {
			prog.finished(l.status(), l.trialLine(&t))
		}
	}
	return running, nil
}

// notInterrupted counts the trials of each config (all phases) that are not
// interrupted, and the repeat indices they hold.
func notInterrupted(trials ...[]store.Trial) (map[string]int, map[string]map[int]bool) {
	n, used := map[string]int{}, map[string]map[int]bool{}
	for _, ts := range trials {
		for _, t := range ts {
			if t.State == store.StateInterrupted {
				continue
			}
			n[t.ConfigID]++
			if used[t.ConfigID] == nil {
				used[t.ConfigID] = map[int]bool{}
			}
			used[t.ConfigID][t.Repeat] = true
		}
	}
	return n, used
}

// searchShared runs search trials of a shared study until a study-wide
// stop condition holds and no other worker has a search trial in flight.
func (l *Loop) searchShared(ctx context.Context, prog progress) (string, error) {
	dups := 0
	for {
		if err := ctx.Err(); err != nil {
			return StopInterrupted, err
		}
		running, err := l.sync(ctx, prog, true)
		if err != nil {
			return "", err
		}
		var inflight []spaces.Config
		for _, t := range running {
			if t.Repeat == 0 {
				inflight = append(inflight, t.Config)
			}
		}
		if ps, ok := l.prop.(pendingSetter); ok {
			ps.SetPending(inflight)
		}
		if reason, stop := l.shouldStop(len(inflight)); stop {
			if len(inflight) == 0 {
				return reason, nil
			}
			if err := l.wait(ctx); err != nil {
				return StopInterrupted, err
			}
			continue
		}
		l.mu.Lock()
		trials := slices.Clone(l.st.trials)
		afterDefault := l.st.searchDone > 0 || l.cfg.Default.Len() == 0
		l.mu.Unlock()
		n, _ := notInterrupted(trials, running)
		var cfg spaces.Config
		// The queue: configs whose trial was interrupted (a worker lost)
		// and that no worker has measured or claimed since; then the
		// enqueued configs; then the proposer.
		for _, t := range trials {
			if t.State == store.StateInterrupted && t.Repeat == 0 && n[t.ConfigID] == 0 {
				cfg = t.Config
				break
			}
		}
		if cfg.Len() == 0 && afterDefault {
			for _, c := range l.cfg.Enqueue {
				if n[c.ID()] == 0 {
					cfg = c
					break
				}
			}
		}
		if cfg.Len() == 0 {
			c, err := l.prop.Ask(ctx)
			switch {
			case ctx.Err() != nil:
				return StopInterrupted, ctx.Err()
			case errors.Is(err, ErrSpaceExhausted) && len(inflight) > 0:
				if err := l.wait(ctx); err != nil {
					return StopInterrupted, err
				}
				continue
			case errors.Is(err, ErrSpaceExhausted):
				return StopExhausted, nil
			case err != nil:
				return "", fmt.Errorf("propose: %w", err)
			}
			if i := slices.IndexFunc(trials, func(t store.Trial) bool { return t.ConfigID == c.ID() && t.State.Measured() && t.Repeat == 0 }); i >= 0 {
				l.prop.Tell(c, told(trials[i].Result))
				if dups++; dups >= 100 {
					return StopExhausted, nil
				}
				continue
			}
			cfg = c
		}
		_, err = l.runOne(ctx, prog, cfg, 0)
		switch {
		case errors.Is(err, ErrTrialBudget):
			continue // the next sync sees the trials that took it
		case errors.Is(err, ErrClaimed):
			// Another worker took it between our read and our claim.
			if dups++; dups >= 100 {
				return StopExhausted, nil
			}
			continue
		case errors.Is(err, ErrLeaseLost) && ctx.Err() == nil:
			continue
		case err != nil:
			return "", err
		}
		dups = 0
	}
}

// heartbeat renews t's lease every third of the lease until ctx ends. It
// cancels the trial (cause ErrLeaseLost) when the lease was taken back, or
// when no renewal succeeded for a whole lease: without a connection the
// lease is not extended, another worker may take the config, and this
// worker must not go on measuring it.
func (l *Loop) heartbeat(ctx context.Context, t store.Trial, cancel context.CancelCauseFunc) {
	every := max(l.cfg.Lease/3, 10*time.Millisecond)
	lastOK := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, every)
		err := l.cfg.Shared.Heartbeat(hctx, t)
		hcancel()
		switch {
		case err == nil:
			lastOK = time.Now()
		case errors.Is(err, ErrLeaseLost):
			cancel(fmt.Errorf("trial %d: %w", t.Seq, err))
			return
		case ctx.Err() != nil:
			return
		case time.Since(lastOK) >= l.cfg.Lease:
			cancel(fmt.Errorf("trial %d: no heartbeat for %s (%v): %w", t.Seq, l.cfg.Lease, err, ErrLeaseLost))
			return
		default:
			l.log.Warn("heartbeat failed", "trial", t.Seq, "err", err)
		}
	}
}

// finishShared writes the end of a shared study's trial, retrying with
// backoff while the database is unreachable. Until it is written the trial
// is also kept in a file under SpoolDir, so a result is never dropped
// silently: when retrying gives up the file stays and the error names it.
// A trial taken back meanwhile (store.ErrState, store.ErrNotFound) is not
// stored; its file goes too, and the caller drops the stale result.
func (l *Loop) finishShared(ctx context.Context, rec store.Trial) error {
	final := []error{store.ErrState, store.ErrInvalidResult, store.ErrNotFound}
	spool := ""
	err := l.retry(ctx, "store trial end", func(ctx context.Context) error {
		err := l.store.Finish(ctx, rec)
		if err != nil && spool == "" && l.cfg.SpoolDir != "" && !isAny(err, final...) {
			var werr error
			if spool, werr = keepPending(l.cfg.SpoolDir, rec); werr != nil {
				l.log.Warn("cannot keep the trial's result locally", "dir", l.cfg.SpoolDir, "err", werr)
			}
		}
		return err
	}, final...)
	switch {
	case spool == "":
	case err == nil, errors.Is(err, store.ErrState), errors.Is(err, store.ErrNotFound):
		os.Remove(spool)
	default:
		err = fmt.Errorf("%w (the result is kept in %s: the next start of a worker of this study stores it)", err, spool)
	}
	return err
}

// isAny reports whether err matches one of targets.
func isAny(err error, targets ...error) bool {
	return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(err, t) })
}
