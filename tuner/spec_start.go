package tuner

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// StartConfig is what a door adds to a resolved search to run it: where
// progress and logs go, and the environment of its GPU set.
type StartConfig struct {
	Logger   *slog.Logger
	Progress io.Writer // live progress; nil = none
	Terminal bool      // Progress is a terminal: draw a live bar
	Width    int       // columns of that terminal
	// OnStatus receives the loop's status after each trial starts and
	// finishes (the service streams it); nil = none.
	OnStatus func(Status)
	// OnTrial receives each finished or interrupted trial; nil = none.
	OnTrial func(store.Trial)
	// Env is added to the engine's environment after the spec's own (the
	// service sets CUDA_VISIBLE_DEVICES of a GPU set here).
	Env []string
	// Observer receives engine start, surrogate fit and store write
	// timings; nil = none.
	Observer Observer
	// DataDir is where files beside the database go (engine logs, results
	// kept while the database is away); "": dbopen.DataDir of the
	// database's Path.
	DataDir string
	// Shared makes this process one worker of a study that several serve
	// (a PostgreSQL database, tuner worker): each trial is leased instead
	// of the study being locked.
	Shared bool
}

// Run is a search ready to run: the study is created and locked.
type Run struct {
	Loop  *Loop
	Study store.Study
	// StaleLock describes a previous search of the study that died without
	// releasing its lock (taken over), or is empty.
	StaleLock string
	LogDir    string
	// Worker is this process's name in a shared study ("" otherwise), and
	// OtherWorkers the live workers it joined.
	Worker       string
	OtherWorkers int
	closers      []func()
}

// Close stops the engine runner and releases the study lock.
func (r *Run) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// Start opens the study in st (checking a resume against the existing
// studies), locks it, reads the history, prunes the space, and builds the
// proposer, the runner and the loop. The caller runs Loop.Run and then
// Close.
func (ss *Search) Start(ctx context.Context, st store.DB, sc StartConfig) (*Run, error) {
	log := sc.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ss.Spec.Resume && !ss.Spec.NewStudy {
		if err := CheckResumable(ctx, st, ss.Key); err != nil {
			return nil, err
		}
	}
	if sc.DataDir == "" {
		sc.DataDir = dbopen.DataDir(st.Path())
	}
	study, err := st.EnsureStudy(ctx, ss.Key)
	if err != nil {
		return nil, err
	}
	run := &Run{Study: study}
	var shared *SharedStudy
	var member store.Membership
	if sc.Shared {
		// A shared database: this process is one worker of the study;
		// each trial is leased, so no study lock.
		sh, m, err := ss.joinShared(ctx, st, study.ID)
		if err != nil {
			return nil, err
		}
		shared, member = &sh, m
		if m.Others > 0 {
			// Workers started with one --seed would draw the same
			// candidates (and the same simulator noise): each joining
			// worker draws its own.
			h := fnv.New64a()
			h.Write([]byte(sh.Worker))
			ss.Spec.Seed ^= h.Sum64()
		}
		run.Worker, run.OtherWorkers = sh.Worker, m.Others
		run.closers = append(run.closers, func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = st.LeaveStudy(ctx, study.ID, sh.Worker)
		})
	} else {
		// One search per study: a second one would stop the first one's
		// engine (taken for a stale one) and measure configs twice.
		lock, err := st.LockStudy(ctx, study.ID)
		if err != nil {
			return nil, err
		}
		if lock.Stale != nil {
			run.StaleLock = lock.Stale.String()
		}
		run.closers = append(run.closers, func() { lock.Unlock() })
	}
	fail := func(err error) (*Run, error) {
		run.Close()
		return nil, err
	}
	own, other, err := History(ctx, st, ss.Key, study.ID)
	if err != nil {
		return fail(err)
	}
	ss.ApplyPrune(own, other)
	prop, err := ss.newProposer(ctx, other, st, log, sc.Observer)
	if err != nil {
		return fail(err)
	}
	run.LogDir = ss.Spec.LogDir
	if run.LogDir == "" {
		run.LogDir = filepath.Join(sc.DataDir, "logs", study.ID)
	}
	runner, closeRunner, err := ss.newRunner(run.LogDir, sc.Env, log)
	if err != nil {
		return fail(err)
	}
	run.closers = append(run.closers, closeRunner)

	cfg := ss.Loop
	cfg.Study = study.ID
	cfg.Workload, cfg.SLO, cfg.Metrics, cfg.Default = ss.Workload, ss.SLO, ss.Metrics, ss.Space.DefaultConfig()
	cfg.Enqueue = ss.Enqueue
	cfg.Progress, cfg.Terminal, cfg.Logger, cfg.Width = sc.Progress, sc.Terminal, log, sc.Width
	cfg.OnStatus, cfg.OnTrial = sc.OnStatus, sc.OnTrial
	if obs := sc.Observer; obs != nil {
		cfg.OnTrial = func(t store.Trial) {
			observeTrial(obs, t)
			if sc.OnTrial != nil {
				sc.OnTrial(t)
			}
		}
	}
	if shared != nil {
		cfg.Shared, cfg.Lease, cfg.Elapsed = *shared, shared.Lease, member.Elapsed
		cfg.RetryFor = max(2*shared.Lease, time.Minute)
		cfg.SpoolDir = filepath.Join(sc.DataDir, "pending", study.ID)
		// Results kept while the database was away (by this worker or one
		// that ran here before) are stored before anything is measured.
		if _, err := StorePending(ctx, st, study.ID, cfg.SpoolDir, shared.Worker, shared.Lease, cfg.MaxTrials, log); err != nil {
			return fail(err)
		}
		// Joining live workers is not a resume: the study is theirs too.
		// Nor is a study that had no trial when this worker joined: the
		// trials the loop finds were begun by workers that joined after
		// it (on a busy machine they may claim their first trials before
		// this one's loop reads the study).
		cfg.Resume = cfg.Resume || member.Others > 0 || !member.HadTrials
	}
	if run.Loop, err = New(cfg, runner, prop, StudyStore{Store: st, Study: study.ID, Observer: sc.Observer}); err != nil {
		return fail(AsUsage(err))
	}
	return run, nil
}

// NewProposer builds the proposer over the pruned space (the resolved one
// when not pruned yet) with the GBDT surrogate unless NoSurrogate; a named
// prior is read as a file, else from models (nil: files only).
func (ss *Search) NewProposer(ctx context.Context, other []search.Observation, models store.DB, log *slog.Logger) (SearchProposer, error) {
	return ss.newProposer(ctx, other, models, log, nil)
}

// newProposer is NewProposer with the surrogate's fits reported to obs
// (nil: none).
func (ss *Search) newProposer(ctx context.Context, other []search.Observation, models store.DB, log *slog.Logger, obs Observer) (SearchProposer, error) {
	pc := search.DefaultProposerConfig()
	pc.Space = ss.Pruned
	if pc.Space == nil {
		pc.Space = ss.Space
	}
	pc.Sampler = search.SamplerKind(ss.Spec.Sampler)
	pc.Seed = ss.Spec.Seed
	pc.Objectives = ss.Metrics.Objectives()
	pc.SLO = ss.SLO
	pc.History = other
	pc.Logger = log
	if !ss.Spec.NoSurrogate {
		so := surrogate.DefaultOptions()
		so.Seed = ss.Spec.Seed
		sc, err := search.NewSurrogateScorer(pc.Space, ss.Workload, pc.Objectives, ss.SLO, so)
		if err != nil {
			return SearchProposer{}, err
		}
		if ref := ss.Spec.Surrogate; ref != "" {
			prior, err := LoadPrior(ctx, ref, models)
			if err != nil {
				return SearchProposer{}, err
			}
			if err := sc.SetPrior(prior, search.DefaultPriorWeight, pc.Space); err != nil {
				return SearchProposer{}, Usagef("--surrogate %s: %v", ref, err)
			}
			pc.MinScreenHistory = 1 // the prior steers from the first trial after vLLM's default
		}
		pc.Scorer = sc
		if obs != nil {
			pc.Scorer = observedScorer{sc, obs}
		}
	}
	p, err := search.NewProposer(pc)
	if err != nil {
		return SearchProposer{}, AsUsage(err)
	}
	return SearchProposer{Proposer: p}, nil
}

// LoadPrior reads a surrogate prior: a model file (as the store keeps
// models) when the path exists, else a model stored under that name.
func LoadPrior(ctx context.Context, ref string, models store.DB) (*surrogate.Surrogate, error) {
	var blob []byte
	if _, err := os.Stat(ref); err == nil {
		if blob, err = bounded.ReadFile(ref, int64(surrogate.DefaultLimits().MaxBytes)); err != nil {
			return nil, Usagef("--surrogate %s: %v", ref, err)
		}
	} else {
		if models == nil {
			return nil, Usagef("--surrogate %s: no such file, and no database to look the name up in", ref)
		}
		blob, _, err = models.GetModel(ctx, ref)
		if errors.Is(err, store.ErrNotFound) {
			return nil, Usagef("--surrogate %s: no such file or stored model (tuner surrogate list)", ref)
		}
		if err != nil {
			return nil, err
		}
	}
	m, err := surrogate.Unmarshal(blob)
	if err != nil {
		return nil, Usagef("--surrogate %s: %v", ref, err)
	}
	return m, nil
}

// The runners of the engines satisfy the loop's Runner.
var (
	_ Runner = (*trial.Runner)(nil)
	_ Runner = (*sim.Runner)(nil)

	_ StagedRunner = (*sim.Runner)(nil)
	_ StagedRunner = (*sim.FreshNoiseRunner)(nil)
)

// timeScale reads --time-scale=F from sim-virtual's engine arguments (0
// when absent): as vllm-sim's flag, wall seconds per simulated second.
func timeScale(args []string) (float64, error) {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--time-scale=")
		if !ok && a == "--time-scale" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || math.IsInf(f, 0) {
			return 0, Usagef("--engine-arg --time-scale=%s: want a number > 0", v)
		}
		return f, nil
	}
	return 0, nil
}

// pacedRunner makes a virtual trial take its simulated time (startup and
// measurement) x scale of wall time, as an engine process would: the
// benchmark of several workers needs engine-bound trials, and a worker
// killed "mid-trial" needs a trial to be in.
type pacedRunner struct {
	Runner
	scale float64
}

func (p pacedRunner) Run(ctx context.Context, cfg spaces.Config, w trial.Workload) (trial.Result, error) {
	res, err := p.Runner.Run(ctx, cfg, w)
	if err != nil {
		return res, err
	}
	return res, pace(ctx, res.Phases.TotalS, p.scale)
}

// pace waits the wall-clock time of simS simulated seconds at scale (what
// a live engine would have taken), or until ctx ends.
func pace(ctx context.Context, simS, scale float64) error {
	t := time.NewTimer(time.Duration(simS * scale * float64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newRunner builds the runner of the engine: sim-virtual in-process, the
// others as engine processes through package trial.
func (ss *Search) newRunner(logDir string, env []string, log *slog.Logger) (Runner, func(), error) {
	if ss.Engine == EngineSimVirtual {
		sc := sim.DefaultConfig()
		sc.Target = ss.Target
		sc.Noise = true
		sc.Seed = ss.Spec.Seed
		host, err := sim.ParseHostArgs(ss.EngineArgs)
		if err != nil {
			return nil, nil, Usagef("--engine-arg: %v", err)
		}
		sc.Host = host
		r, err := sim.NewFreshNoiseRunner(sc)
		if err != nil {
			return nil, nil, err
		}
		scale, err := timeScale(ss.EngineArgs)
		if err != nil || scale == 0 {
			return r, func() {}, err
		}
		return pacedRunner{r, scale}, func() {}, nil
	}
	rc := trial.DefaultConfig()
	rc.Command = ss.BaseCommand()
	rc.ExtraArgs = ss.EngineArgs
	rc.Env = append(append([]string(nil), ss.EngineEnv...), env...)
	rc.LogDir = logDir
	rc.Logger = log
	rc.GPUIdentity = trial.GPUIdentity{Name: ss.Target.GPU.Name, Count: ss.Target.GPUCount, MemoryGiB: ss.Target.GPU.MemoryGiB}
	rc.Stability.MaxExtensions = ss.Spec.Extend
	rc.StartupTimeout = ss.Spec.StartupTimeout.Std()
	rc.MaxLogBytes = int64(ss.Spec.EngineLogMiB) << 20
	r, err := trial.NewRunner(rc)
	if err != nil {
		return nil, nil, err
	}
	return r, func() { r.Close() }, nil
}
