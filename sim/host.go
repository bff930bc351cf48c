package sim

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
)

// Host is what the simulated machine does beyond one engine's config, for
// judging the tuner's verdicts against a known truth: a server that ignores
// every tuning flag (no config can beat vLLM's default), one on which every
// non-default config is a known factor faster, and a host whose speed
// drifts over time (thermals, neighbours, clocks), shared by every engine
// it runs. The zero value is a plain host.
type Host struct {
	// IgnoreTuningFlags runs every config as vLLM's default (the flags are
	// accepted and have no effect).
	IgnoreTuningFlags bool `json:"ignore_tuning_flags,omitempty"`
	// TunedSpeedup makes every config that differs from vLLM's default
	// this factor faster (e.g. 1.05: a real 5% gain); 0 or 1 = off.
	TunedSpeedup float64 `json:"tuned_speedup,omitempty"`
	// Drift is the spread (standard deviation of log speed) of the host's
	// speed over time, e.g. 0.05 for about 5%; 0 = a steady host.
	Drift float64 `json:"drift,omitempty"`
	// DriftPeriod is the time over which the speed moves by about Drift,
	// in (simulated) seconds; 0 = DefaultDriftPeriod.
	DriftPeriod float64 `json:"drift_period,omitempty"`
	// DriftSeed seeds the drift's walk.
	DriftSeed uint64 `json:"drift_seed,omitempty"`
}

// DefaultDriftPeriod is the drift's time scale when none is given: an hour.
const DefaultDriftPeriod = 3600.0

// Validate checks the knobs, naming the vllm-sim flag.
func (h Host) Validate() error {
	switch {
	case math.IsNaN(h.TunedSpeedup) || math.IsInf(h.TunedSpeedup, 0) || h.TunedSpeedup < 0:
		return argErrorf("argument --tuned-speedup: invalid value: %v (must be finite and > 0)", h.TunedSpeedup)
	case math.IsNaN(h.Drift) || math.IsInf(h.Drift, 0) || h.Drift < 0 || h.Drift > 1:
		return argErrorf("argument --drift: invalid value: %v (a spread in [0, 1])", h.Drift)
	case math.IsNaN(h.DriftPeriod) || math.IsInf(h.DriftPeriod, 0) || h.DriftPeriod < 0:
		return argErrorf("argument --drift-period: invalid value: %v (seconds, finite and > 0)", h.DriftPeriod)
	}
	return nil
}

// Speed is the host's speed at time t (seconds; every engine of the host
// reads the same clock), 1 on a steady host: a slow seeded drift of log
// speed with standard deviation Drift that moves on the scale of
// DriftPeriod. It is value noise, not a free random walk: seeded normal
// knots every DriftPeriod, joined by a smoothstep, so the speed is
// continuous, trends one way for a good part of a period (the hard case
// for the order of a re-measurement's runs), is stationary (it does not
// wander off over a long run) and is the same for any t in any process.
func (h Host) Speed(t float64) float64 {
	if h.Drift <= 0 {
		return 1
	}
	p := h.DriftPeriod
	if p <= 0 {
		p = DefaultDriftPeriod
	}
	x := t / p
	k := math.Floor(x)
	f := x - k
	s := f * f * (3 - 2*f)
	a, b := h.knot(int64(k)), h.knot(int64(k)+1)
	// The smoothstep mix of two independent knots has a smaller spread
	// between them; rescale so that the spread is Drift at every t.
	v := (a*(1-s) + b*s) / math.Sqrt((1-s)*(1-s)+s*s)
	return math.Exp(h.Drift * v)
}

// knot is the standard normal value of knot k (Box-Muller over two hashed
// uniforms).
func (h Host) knot(k int64) float64 {
	u1, u2 := h.uniform(k, 1), h.uniform(k, 2)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

func (h Host) uniform(k int64, lane uint64) float64 {
	x := h.DriftSeed*0x9e3779b97f4a7c15 ^ uint64(k)*0xbf58476d1ce4e5b9 ^ lane*0x94d049bb133111eb
	// splitmix64's finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// Effective is the config the engine runs (vLLM's default when tuning
// flags are ignored) and the speed factor of the config itself
// (TunedSpeedup when cfg differs from vLLM's default for t, else 1).
func (h Host) Effective(t spaces.Target, cfg spaces.Config) (spaces.Config, float64) {
	return h.effective(cfg, func(c spaces.Config) (EngineArgs, error) { return ResolveArgs(t, c) })
}

// effective is Effective with the caller's argument resolution (the
// runner's parsed space).
func (h Host) effective(cfg spaces.Config, resolve func(spaces.Config) (EngineArgs, error)) (spaces.Config, float64) {
	speed := 1.0
	if h.TunedSpeedup > 0 && h.TunedSpeedup != 1 && !isDefaultConfig(cfg, resolve) {
		speed = h.TunedSpeedup
	}
	if h.IgnoreTuningFlags {
		return spaces.Config{}, speed
	}
	return cfg, speed
}

// isDefaultConfig reports whether cfg resolves to the engine arguments of
// vLLM's default (a config that spells out default values is one).
func isDefaultConfig(cfg spaces.Config, resolve func(spaces.Config) (EngineArgs, error)) bool {
	if cfg.Len() == 0 {
		return true
	}
	a, err := resolve(cfg)
	if err != nil {
		return false
	}
	d, err := resolve(spaces.Config{})
	return err == nil && reflect.DeepEqual(a, d)
}

// hostFlags are the Host's vllm-sim flags (dashes), for ParseHostArgs.
var hostFlags = []string{"--ignore-tuning-flags", "--tuned-speedup", "--drift", "--drift-period", "--drift-seed"}

// ParseHostArgs reads the Host's flags out of engine arguments (as
// `--engine-arg` passes them to sim-virtual): --ignore-tuning-flags,
// --tuned-speedup X, --drift X, --drift-period SECONDS, --drift-seed N, as
// --x V or --x=V, dashes or underscores. Other arguments are left alone.
func ParseHostArgs(args []string) (Host, error) {
	var h Host
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		name = "--" + strings.ReplaceAll(strings.TrimPrefix(name, "--"), "_", "-")
		if !strings.HasPrefix(args[i], "--") {
			continue
		}
		known := false
		for _, f := range hostFlags {
			known = known || f == name
		}
		if !known {
			continue
		}
		if name == "--ignore-tuning-flags" {
			if hasVal {
				return h, argErrorf("argument --ignore-tuning-flags: ignored explicit argument '%s'", val)
			}
			h.IgnoreTuningFlags = true
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return h, argErrorf("argument %s: expected one argument", name)
			}
			i++
			val = args[i]
		}
		if err := h.set(name, val); err != nil {
			return h, err
		}
	}
	return h, h.Validate()
}

// set applies one valued Host flag.
func (h *Host) set(name, val string) error {
	if name == "--drift-seed" {
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return argErrorf("argument --drift-seed: invalid int value: '%s'", val)
		}
		h.DriftSeed = n
		return nil
	}
	f, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return argErrorf("argument %s: invalid float value: '%s'", name, val)
	}
	switch name {
	case "--tuned-speedup":
		h.TunedSpeedup = f
	case "--drift":
		h.Drift = f
	case "--drift-period":
		h.DriftPeriod = f
	default:
		return errors.New("sim: unknown host flag " + name)
	}
	return nil
}

// String names the host's knobs that are on, for logs ("" for a plain host).
func (h Host) String() string {
	var parts []string
	if h.IgnoreTuningFlags {
		parts = append(parts, "tuning flags ignored")
	}
	if h.TunedSpeedup > 0 && h.TunedSpeedup != 1 {
		parts = append(parts, fmt.Sprintf("non-default configs x%g", h.TunedSpeedup))
	}
	if h.Drift > 0 {
		p := h.DriftPeriod
		if p <= 0 {
			p = DefaultDriftPeriod
		}
		parts = append(parts, fmt.Sprintf("drift %g over %gs (seed %d)", h.Drift, p, h.DriftSeed))
	}
	return strings.Join(parts, ", ")
}

// hostSpeed is the drift on the real clock: read at the wall time in
// simulated seconds (Unix time / --time-scale), so every vllm-sim of one
// --drift-seed sees the same speed at the same moment, as engines on one
// host would; nil without drift.
func (o ServeOptions) hostSpeed() func() float64 {
	h, scale := o.Machine, o.TimeScale
	if h.Drift <= 0 {
		return nil
	}
	if scale <= 0 {
		scale = 1
	}
	return func() float64 { return h.Speed(float64(time.Now().UnixNano()) / 1e9 / scale) }
}
