package tuner

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// ErrEngineBroken: the engine fails the same way whatever the config,
// before it ever answers /health (a broken install: "ImportError:
// libcudart.so.12"). The search stops; nothing is learned from it.
var ErrEngineBroken = errors.New("engine broken")

// brokenAfter is how many search configs in a row, before any engine of the
// study was ever healthy, may crash the same way before the engine counts
// as broken. vLLM's default config alone suffices: it is the one config
// the engine's own authors run.
const brokenAfter = 3

// preHealthCrash reports whether r is a crash before the engine became
// healthy, with no reason the config could explain (OOM, KV cache, invalid
// arguments have their own classes).
func preHealthCrash(r *trial.Result) bool {
	return r != nil && r.Status == trial.StatusFailed && r.Failure == trial.FailCrashed && !reachedHealth(r)
}

// reachedHealth: the engine answered /health (the runner measures only
// then; a crash during the first level leaves no level but measure time).
func reachedHealth(r *trial.Result) bool { return len(r.Levels) > 0 || r.Phases.MeasureS > 0 }

var reDigits = regexp.MustCompile(`\d+`)

// crashSignature is the failure line of a crash with numbers (pids, ports)
// blanked, so the same failure of two configs compares equal.
func crashSignature(r *trial.Result) string {
	line, _, _ := strings.Cut(r.Error, "\n")
	return reDigits.ReplaceAllString(line, "#")
}

// healthSeen reports whether any trial of the study got a healthy engine
// (a measured level) or failed for a reason of its config. Caller holds mu.
func (l *Loop) healthSeen() bool {
	for _, t := range l.st.trials {
		if r := t.Result; r != nil && (reachedHealth(r) || r.Status != trial.StatusFailed ||
			r.Failure != trial.FailCrashed && r.Failure != trial.FailInterrupted) {
			return true
		}
	}
	return false
}

// checkBroken decides, after a trial, whether the engine is broken: res
// is a pre-health crash, no engine of the study was ever healthy, and it
// is vLLM's default config or the brokenAfter-th search config in a row
// that crashed the same way. Then res becomes interrupted (so the store
// and the proposer never hold it as a failed config) and the error says
// so. Otherwise a pre-health crash is held back from the proposer until
// the engine proves it can run (tell).
func (l *Loop) checkBroken(cfg spaces.Config, phase Phase, res *trial.Result) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !preHealthCrash(res) || l.healthSeen() {
		return nil
	}
	sig := crashSignature(res)
	same := 1
	for _, d := range l.st.heldBack {
		if crashSignature(d.res) == sig {
			same++
		}
	}
	isDefault := l.cfg.Default.Len() > 0 && cfg.ID() == l.cfg.Default.ID()
	if !isDefault && (phase != PhaseSearch || same < brokenAfter) {
		return nil
	}
	what := "vLLM's default config"
	if !isDefault {
		what = fmt.Sprintf("%d configs in a row", same)
	}
	line, _, _ := strings.Cut(res.Error, "\n")
	err := fmt.Errorf("%w: %s failed before the engine became healthy, and no engine of this study ever did: %s (log %s); check the engine's installation; no config was learned from",
		ErrEngineBroken, what, line, res.LogPath)
	res.Status, res.Failure, res.Error = trial.StatusFailed, trial.FailInterrupted, err.Error()+"\n"+res.Error
	return err
}

// heldTrial is a search result held back from the proposer.
type heldTrial struct {
	cfg spaces.Config
	res *trial.Result
}

// tell teaches the proposer a search result. Pre-health crashes wait while
// no engine of the study was ever healthy (they may be the environment's
// fault, see checkBroken); the first other result releases them.
func (l *Loop) tell(cfg spaces.Config, res *trial.Result) {
	l.mu.Lock()
	if preHealthCrash(res) && !l.healthSeen() {
		l.st.heldBack = append(l.st.heldBack, heldTrial{cfg, res})
		l.mu.Unlock()
		return
	}
	held := l.st.heldBack
	l.st.heldBack = nil
	l.mu.Unlock()
	for _, h := range held {
		l.prop.Tell(h.cfg, h.res)
	}
	l.prop.Tell(cfg, told(res))
}
