package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// The final re-measurement runs vLLM's default and the finalists in
// interleaved rounds: each round measures the default first and then every
// finalist once, in an order rotated round by round (roundOrder), and one
// more run of the default closes the last round; the runs are stored with
// the round as Trial.Repeat (the closing run as round rounds+1, the first
// run of a round that is not run). Every finalist's run then lies between
// two runs of the default, and the gain compares it with the default's
// throughput at that moment, fitted through them (EstimateGains), instead
// of comparing a block of runs of one config with a block of another taken
// an hour apart, or a run with one taken earlier in a drifting host.

// roundPlan is what the final re-measurement runs: the configs, how many
// rounds, and why fewer than asked (note).
type roundPlan struct {
	ids    []string
	cfgs   map[string]spaces.Config
	rounds int
	note   string
	// def is vLLM's default's ID when it is among ids: it opens every
	// round and closes the last one (round rounds+1).
	def string
}

// closing is the round of the plan's closing run of the default (0: none).
func (p roundPlan) closing() int {
	if p.def == "" || p.rounds == 0 {
		return 0
	}
	return p.rounds + 1
}

// done reports whether round r of config id has a run that was not
// interrupted (running, or ended with a verdict).
func roundDone(trials []store.Trial, id string, r int) bool {
	return slices.ContainsFunc(trials, func(t store.Trial) bool {
		return t.Repeat > 0 && t.Repeat == r && t.ConfigID == id && t.State != store.StateInterrupted
	})
}

// planRounds plans the re-measurement from the trials so far (running ones
// included, in a shared study): nothing when there is fewer than two
// configs to compare (vLLM's default is not re-measured against itself),
// and under --budget the whole rounds that fit in the time left at the
// mean trial time, none when fewer than two fit (one round cannot tell a
// gain from noise).
func (l *Loop) planRounds(trials []store.Trial) roundPlan {
	p := roundPlan{cfgs: map[string]spaces.Config{}}
	if l.cfg.Repeats <= 1 || l.cfg.Finalists == 0 {
		return p
	}
	for _, c := range l.remeasurePlan(trials) {
		p.ids = append(p.ids, c.ConfigID)
		p.cfgs[c.ConfigID] = c.Config
		if c.ConfigID == l.cfg.Default.ID() {
			p.def = c.ConfigID
		}
	}
	if len(p.ids) < 2 {
		what := "no config"
		if len(p.ids) == 1 {
			what = "only config " + p.ids[0]
			if p.ids[0] == l.cfg.Default.ID() {
				what = "only vLLM's default"
			}
		}
		p.note = fmt.Sprintf("final re-measurement skipped: %s measured and feasible, nothing to compare", what)
		return p
	}
	p.rounds = l.cfg.Repeats
	mean, ok := l.trialMean(trials)
	if l.cfg.Budget <= 0 || !ok {
		return p
	}
	l.mu.Lock()
	left := l.cfg.Budget - l.now().Sub(l.st.start)
	l.mu.Unlock()
	fit, need := 0, time.Duration(0)
	for r := 1; r <= l.cfg.Repeats; r++ {
		for _, id := range p.ids {
			if !roundDone(trials, id, r) {
				need += mean
			}
		}
		closing := time.Duration(0) // the default's run after round r
		if p.def != "" && !roundDone(trials, p.def, r+1) {
			closing = mean
		}
		if need+closing > left {
			break
		}
		fit = r
	}
	switch {
	case fit < 2:
		p.rounds = 0
		p.note = fmt.Sprintf("final re-measurement skipped: %d rounds of %d runs (~%s each) do not fit in the %s left of --budget, and fewer than 2 cannot tell a gain from noise",
			l.cfg.Repeats, len(p.ids), fmtDur(mean), fmtDur(max(0, left)))
	case fit < l.cfg.Repeats:
		p.rounds = fit
		p.note = fmt.Sprintf("final re-measurement cut to %d of %d rounds to fit the %s left of --budget", fit, l.cfg.Repeats, fmtDur(left))
	}
	return p
}

// trialMean is the wall time per trial for planning: this run's (loop time
// included, meanDur), else the stored trials' own durations.
func (l *Loop) trialMean(trials []store.Trial) (time.Duration, bool) {
	l.mu.Lock()
	mean, ok := l.st.meanDur()
	l.mu.Unlock()
	if ok {
		return mean, true
	}
	var sum time.Duration
	n := 0
	for _, t := range trials {
		if t.State.Measured() && t.Ended.After(t.Started) {
			sum += t.Ended.Sub(t.Started)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / time.Duration(n), true
}

// runs are the plan's runs in order: each round in roundOrder, then the
// closing run of the default.
func (p roundPlan) runs(study string) []roundRun {
	var out []roundRun
	for r := 1; r <= p.rounds; r++ {
		for _, id := range roundOrder(study, r, p.ids, p.def) {
			out = append(out, roundRun{id, r})
		}
	}
	if c := p.closing(); c > 0 {
		out = append(out, roundRun{p.def, c})
	}
	return out
}

// roundRun is one run of a plan: a config in a round.
type roundRun struct {
	id    string
	round int
}

// next is the first run of the plan not done: rounds earliest first, each
// in its order, then the closing run; ok is false when every run is done.
func (p roundPlan) next(study string, trials []store.Trial) (spaces.Config, int, bool) {
	for _, x := range p.runs(study) {
		if !roundDone(trials, x.id, x.round) {
			return p.cfgs[x.id], x.round, true
		}
	}
	return spaces.Config{}, 0, false
}

// left counts the runs of the plan not done.
func (p roundPlan) left(trials []store.Trial) int {
	n := 0
	for _, x := range p.runs("") {
		if !roundDone(trials, x.id, x.round) {
			n++
		}
	}
	return n
}

// remeasure runs the planned rounds (resumable: runs stored already
// count). The plan is made once, when the search ends; a round that would
// begin after the budget is spent is not begun (the closing run of the
// default belongs to the last round: the plan kept room for it).
func (l *Loop) remeasure(ctx context.Context, prog progress) error {
	p := l.beginRounds()
	round := 0
	for {
		cfg, r, ok := p.next(l.cfg.Study, l.trialsSoFar())
		if !ok {
			return nil
		}
		if r != round && round > 0 && r != p.closing() && l.budgetSpent() {
			l.mu.Lock()
			l.st.remeasureNote = fmt.Sprintf("final re-measurement stopped after %d of %d rounds: --budget spent", round, p.rounds)
			l.st.repeatsLeft = 0
			l.mu.Unlock()
			return nil
		}
		round = r
		if _, err := l.runOne(ctx, prog, cfg, r); err != nil {
			return err
		}
	}
}

// budgetSpent reports whether the wall budget is used up.
func (l *Loop) budgetSpent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Budget > 0 && l.now().Sub(l.st.start) >= l.cfg.Budget
}

// trialsSoFar is a copy of the trials folded in.
func (l *Loop) trialsSoFar() []store.Trial {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.st.trials)
}

// beginRounds plans the re-measurement and enters its phase with the
// plan's runs left.
func (l *Loop) beginRounds() roundPlan {
	trials := l.trialsSoFar()
	p := l.planRounds(trials)
	l.mu.Lock()
	l.st.repeatsLeft = p.left(trials)
	l.st.repeatBase = l.st.repeatDone
	l.st.phase = PhaseRepeat
	l.st.remeasureNote = p.note
	l.mu.Unlock()
	return p
}

// remeasureShared runs the planned rounds with the other workers: each run
// (config and round) is claimed once, rounds earliest first, so exactly one
// worker runs it and the rounds stay interleaved; it returns when every
// one has been run.
func (l *Loop) remeasureShared(ctx context.Context, prog progress) error {
	p := l.beginRounds()
	for {
		running, err := l.sync(ctx, prog, true)
		if err != nil {
			return err
		}
		l.mu.Lock()
		all := append(slices.Clone(l.st.trials), running...)
		l.mu.Unlock()
		repeatsRunning := 0
		for _, t := range running {
			if t.Repeat > 0 {
				repeatsRunning++
			}
		}
		l.mu.Lock()
		l.st.repeatsLeft = p.left(all) + repeatsRunning
		l.mu.Unlock()
		cfg, r, ok := p.next(l.cfg.Study, all)
		if !ok {
			if repeatsRunning == 0 {
				return nil
			}
			if err := l.wait(ctx); err != nil {
				return err
			}
			continue
		}
		_, err = l.runOne(ctx, prog, cfg, r)
		switch {
		case errors.Is(err, ErrClaimed), errors.Is(err, ErrLeaseLost) && ctx.Err() == nil:
			continue
		case err != nil:
			return err
		}
	}
}

// repeatReserve is the number of re-measurement runs the budget keeps
// room for while searching: the rounds of the finalists so far and vLLM's
// default and the default's closing run, plus a finalist's rounds when a
// slot is free for the next search trial; none when that makes fewer than
// two configs.
func (l *Loop) repeatReserve(trials []store.Trial) int {
	if l.cfg.Repeats <= 1 || l.cfg.Finalists == 0 {
		return 0
	}
	plan := l.remeasurePlan(trials)
	n := len(plan)
	def := l.cfg.Default.ID()
	hasDef := slices.ContainsFunc(plan, func(c Candidate) bool { return c.ConfigID == def })
	if len(finalistsOf(trials, l.cfg)) < l.cfg.Finalists {
		n++
	}
	if n < 2 {
		return 0
	}
	runs := n * l.cfg.Repeats
	if hasDef {
		runs++
	}
	for _, t := range trials {
		closing := t.Repeat == l.cfg.Repeats+1 && t.ConfigKey() == def
		if t.Repeat > 0 && t.State != store.StateInterrupted && (t.Repeat <= l.cfg.Repeats || closing) {
			runs--
		}
	}
	return max(0, runs)
}
