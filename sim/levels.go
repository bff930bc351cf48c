package sim

import (
	"context"
	"io"
	"os"

	"github.com/vllm-tuner/tuner/trial"
)

// VirtualLevels measures load levels of the server a vllm-sim command line
// describes on the virtual clock: the same engine (target, flags, memory
// plan, --slowdown, host) that Serve runs in real time, serving a level's
// requests in milliseconds of CPU, so the figures do not depend on how
// busy the machine is. `tuner bench run --engine sim-virtual` measures
// through it; the HTTP server it also starts answers health and identity.
type VirtualLevels struct {
	s *server
}

// NewVirtualLevels builds the engine of o; a config the simulated vLLM
// refuses is the *StartupError Serve would return.
func NewVirtualLevels(o ServeOptions) (*VirtualLevels, error) {
	s, se := newServer(o, &vlog{w: io.Discard, pid: os.Getpid()})
	if se != nil {
		return nil, se
	}
	return &VirtualLevels{s: s}, nil
}

// RuntimeFaults reports whether o injects runtime faults
// (crashes, HTTP errors, malformed chunks, slow tokens, OOM), which only
// the real-clock server simulates: such a server is measured live.
func (o ServeOptions) RuntimeFaults() bool {
	f := o.Faults
	return f.CrashAfter > 0 || f.HTTP500 > 0 || f.MalformedSSE > 0 || f.RuntimeOOMAfter > 0 || (f.SlowTokens > 0 && f.SlowTokens != 1)
}

// Measure serves level idx, lw at load v, on fresh engines (seeded by
// --seed and the level) and summarizes it as a live level is (sc's warm-up
// cut and steady-state windows, the SLO's verdict). ElapsedS is the
// level's simulated span.
func (v *VirtualLevels) Measure(ctx context.Context, idx int, load float64, lw trial.Workload, sc trial.StabilityConfig, slo trial.SLO) (*trial.MeasuredLevel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lv, err := levelAt(lw, load)
	if err != nil {
		return nil, err
	}
	s, o := v.s, v.s.o
	engines := make([]*Engine, s.args.DataParallelSize)
	for i := range engines {
		engines[i] = NewEngine(s.target, s.args, s.calib, s.plan, WithNoise(o.Seed+uint64(idx)*1009+uint64(i)*7919),
			WithSlowdown(o.Slowdown/s.tuned), WithSpeed(o.hostSpeed()))
	}
	recs, span, bd, err := serveLevel(ctx, engines, lv, s.args)
	if err != nil {
		return nil, err
	}
	return trial.FinishLevel(ctx, recs, trial.LevelEnd{Index: idx, Load: lv.workload, Stability: sc, SLO: slo,
		Breakdown: bd, PrefixCache: prefixCacheOf(engines), ElapsedS: span})
}
