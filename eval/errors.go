package eval

import (
	"errors"
	"fmt"
)

// ErrConfig reports an invalid benchmark configuration.
var ErrConfig = errors.New("eval: invalid config")

// ErrStaleCache reports a ground-truth cache whose key does not match the
// current simulator, space or scenario.
var ErrStaleCache = errors.New("eval: ground-truth cache is stale")

// ErrTruthBeaten reports runs whose truly feasible configs, joined with a
// scenario's ground truth, hold more hypervolume than the truth by more
// than noise (TruthSlack): the truth is not the true front, and every HV
// ratio of that scenario is too high. Match with errors.Is; the
// *TruthBeatenError says where.
var ErrTruthBeaten = errors.New("eval: runs beat the ground truth")

// TruthSlack is how much the runs may add to the truth's hypervolume
// before the truth counts as beaten (rounding and the polish's last step).
const TruthSlack = 0.005

// TruthBeatenError names the scenarios whose truth was beaten.
type TruthBeatenError struct {
	Scenarios []string      // scenario names
	Ratios    []float64     // joined HV / truth HV, per scenario
	Configs   []int         // run configs on the joined front, per scenario
	Beyond    [][]RunConfig // those configs, where they were tried (may be fewer than Configs)
}

// RunConfig is a config a run tried: which strategy, seed and search trial
// (0 for a final re-measurement), and its true objective vector.
type RunConfig struct {
	Strategy string    `json:"strategy"`
	Seed     uint64    `json:"seed"`
	Trial    int       `json:"trial"`
	ConfigID string    `json:"config_id"`
	Flags    string    `json:"flags"`
	Vec      []float64 `json:"true_vec"`
}

func (c RunConfig) String() string {
	return fmt.Sprintf("%s seed %d trial %d, config %s %s", c.Strategy, c.Seed, c.Trial, c.ConfigID, fmtVec(c.Vec))
}

func (e *TruthBeatenError) Error() string {
	msg := ""
	for i, s := range e.Scenarios {
		if i > 0 {
			msg += "; "
		}
		msg += fmt.Sprintf("%s: x%.4f (%d configs", s, e.Ratios[i], e.Configs[i])
		if i < len(e.Beyond) && len(e.Beyond[i]) > 0 {
			const shown = 3 // the report's beyond_truth lists them all, with their flags
			for _, c := range e.Beyond[i][:min(shown, len(e.Beyond[i]))] {
				msg += "; " + c.String()
			}
			if len(e.Beyond[i]) > shown {
				msg += fmt.Sprintf("; %d more", len(e.Beyond[i])-shown)
			}
		}
		msg += ")"
	}
	return fmt.Sprintf("%v by more than %.1f%%: %s (the truth's optimiser missed these configs: see polish in eval/polish.go)", ErrTruthBeaten, 100*TruthSlack, msg)
}

func (e *TruthBeatenError) Unwrap() error { return ErrTruthBeaten }

// TruthCheck returns a *TruthBeatenError for the scenarios of rep whose
// truth the runs beat, nil when none.
func TruthCheck(rep *Report) error {
	var e TruthBeatenError
	for _, sc := range rep.Scenarios {
		if sc.JoinedHV > 1+TruthSlack {
			e.Scenarios = append(e.Scenarios, sc.Name)
			e.Ratios = append(e.Ratios, sc.JoinedHV)
			e.Configs = append(e.Configs, sc.FromRuns)
			e.Beyond = append(e.Beyond, sc.BeyondTruth)
		}
	}
	if len(e.Scenarios) == 0 {
		return nil
	}
	return &e
}
