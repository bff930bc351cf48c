package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// Job kinds: a search (the default) or a benchmark.
const (
	KindSearch = "search"
	KindBench  = "bench"
)

// jobKind is the "kind" of a job body ("" when absent or unreadable: the
// kind's parser reports a bad body).
func jobKind(body []byte) string {
	var k struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(body, &k)
	return k.Kind
}

// ParseBenchJob reads a benchmark job body: {"kind":"bench", ...} with the
// options of `tuner bench run` as a tuner.BenchSpec (unknown fields
// refused) over the CLI's defaults, validated as `tuner bench run`
// validates its flags; stored trial and config IDs are looked up in st.
// Options that name files or programs of the server are refused: the
// matrix comes as a tier or inline (matrix_yaml), the config as a trial
// ID, a config ID or "default".
func ParseBenchJob(ctx context.Context, body io.Reader, st store.DB) (tuner.BenchSpec, error) {
	req := struct {
		Kind string `json:"kind"`
		tuner.BenchSpec
	}{BenchSpec: tuner.DefaultBenchSpec()}
	if err := decodeBody("job body", body, &req); err != nil {
		return req.BenchSpec, err
	}
	spec := req.BenchSpec
	if req.Kind != KindBench {
		return spec, tuner.Usagef("job body: kind %q: want %q", req.Kind, KindBench)
	}
	def := tuner.DefaultBenchSpec()
	for _, f := range []struct{ name, v, def string }{
		{"vllm", spec.VLLM, def.VLLM}, {"vllm_sim", spec.VLLMSim, ""}, {"log_dir", spec.LogDir, ""}, {"matrix", spec.Matrix, ""},
	} {
		if f.v != f.def {
			return spec, tuner.Usagef("job body: %s names a file or program of the server: not settable over the API", f.name)
		}
	}
	if c := spec.Config; c != "" && c != tuner.BenchConfigDefault && (strings.ContainsAny(c, `/\`) || strings.HasSuffix(c, ".yaml") || strings.HasSuffix(c, ".yml")) {
		return spec, tuner.Usagef("job body: config %q: only a trial ID, a stored config ID or %q over the API", c, tuner.BenchConfigDefault)
	}
	spec.Lookup = func(context.Context) (store.DB, func(), error) {
		if st == nil {
			return nil, nil, fmt.Errorf("no database")
		}
		return st, func() {}, nil
	}
	b, err := spec.Resolve(ctx)
	if err != nil {
		return spec, err
	}
	return spec, DefaultJobLimits().bench(b)
}

// resolveBench resolves a stored bench job's spec against the store.
func (s *Server) resolveBench(ctx context.Context, j *store.Job) (*tuner.Bench, error) {
	spec := tuner.DefaultBenchSpec()
	if err := json.Unmarshal(j.Spec, &spec); err != nil {
		return nil, fmt.Errorf("job %s: spec: %w", j.ID, err)
	}
	spec.Lookup = func(context.Context) (store.DB, func(), error) { return s.db, func() {}, nil }
	return spec.Resolve(ctx)
}

// benchmark runs a bench job as `tuner bench run` runs it. A benchmark is
// not resumed: a job that ran before (the service stopped or was killed
// during it) fails with its runs kept as partial.
func (s *Server) benchmark(ctx context.Context, set int, j *store.Job, log interface {
	Info(string, ...any)
}) error {
	if j.Runs > 1 {
		return fmt.Errorf("the service stopped during this benchmark; %s: queue the job again", keptRuns(j.BenchRuns))
	}
	b, err := s.resolveBench(ctx, j)
	if err != nil {
		return err
	}
	// A state event of its own, so a client that connects later does not
	// replay the job's "queued" after its progress.
	s.hub.publish(Event{Job: j.ID, State: store.JobRunning})
	var last Event
	t0 := time.Now()
	_, err = b.Run(ctx, s.db, tuner.BenchStartConfig{DataDir: s.cfg.DataDir,
		Logger: s.log.With("job", j.ID),
		Env:    s.gpuEnv(set),
		OnProgress: func(p bench.Progress) {
			if p.Run != "" && !slices.Contains(j.BenchRuns, p.Run) {
				j.BenchRuns = append(j.BenchRuns, p.Run)
				if err := s.db.UpdateJob(context.WithoutCancel(ctx), *j); err != nil {
					log.Info("record the job's run", "run", p.Run, "err", err)
				}
				log.Info("job run", "run", p.Run)
			}
			last = benchEvent(j.ID, p)
			s.hub.publish(last)
		},
		OnRun: func(r *store.Run, _ error) {
			if r == nil || last.Job == "" {
				return
			}
			e := last
			e.Run, e.Done, e.ETAS, e.ElapsedS = r.ID, e.Total, nil, time.Since(t0).Seconds()
			e.Line = fmt.Sprintf("run %s stored: %s, %d of %d cells", r.ID, r.State, len(r.Cells), len(b.Matrix.Cells))
			s.hub.publish(e)
		},
	})
	return err
}

// benchEvent turns a benchmark's progress into an event: level n/N.
func benchEvent(job string, p bench.Progress) Event {
	e := Event{Job: job, State: store.JobRunning, Run: p.Run, Phase: "bench", Done: p.Done, Total: p.Total,
		ElapsedS: p.Elapsed.Seconds(), Running: "cell " + p.Cell + " at " + p.LoadString(), Line: p.Line()}
	if p.ETA >= 0 {
		v := p.ETA.Seconds()
		e.ETAS = &v
	}
	return e
}

// keptRuns says which runs a stopped benchmark left behind.
func keptRuns(ids []string) string {
	if len(ids) == 0 {
		return "no run was stored"
	}
	return "run " + strings.Join(ids, ", ") + " kept its finished cells (partial)"
}
