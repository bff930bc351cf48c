package tuner

import (
	"context"
	"time"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/store"
)

// Observer receives timings of a search's parts as they happen (the
// service exports them as Prometheus histograms; the core imports no
// metrics library). Methods must be quick and safe for concurrent use.
type Observer interface {
	// EngineStarted: an engine took d from launch to ready (the trial's
	// startup phase; also for a trial that failed while starting).
	EngineStarted(d time.Duration)
	// SurrogateFitted: the surrogate model was refit on the history.
	SurrogateFitted(d time.Duration)
	// StoreWritten: a trial record write ("begin" or "finish") took d,
	// committed or not.
	StoreWritten(op string, d time.Duration)
}

// observedScorer times the surrogate's fits.
type observedScorer struct {
	*search.SurrogateScorer
	obs Observer
}

var _ search.Fitter = observedScorer{}

func (s observedScorer) Fit(ctx context.Context, history []search.Observation) error {
	t0 := time.Now()
	err := s.SurrogateScorer.Fit(ctx, history)
	s.obs.SurrogateFitted(time.Since(t0))
	return err
}

// observeTrial reports a finished trial's engine start.
func observeTrial(obs Observer, t store.Trial) {
	if t.Result != nil && t.Result.Phases.StartupS > 0 {
		obs.EngineStarted(time.Duration(t.Result.Phases.StartupS * float64(time.Second)))
	}
}
