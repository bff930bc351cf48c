package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// errCancelled is the cause of a job's context when a client cancels it.
var errCancelled = errors.New("job cancelled")

// Run runs the job queue, one worker per GPU set, until ctx ends. Jobs
// left running by a previous service (killed or stopped) are resumed first
// on their GPU set. When ctx ends, running jobs are stopped like Ctrl-C
// stops a search and stay running in the store, to be resumed by the next
// Run.
func (s *Server) Run(ctx context.Context) error {
	s.refreshQueue(ctx)
	close(s.ready)
	g, ctx := errgroup.WithContext(ctx)
	for i := range s.cfg.GPUSets {
		g.Go(func() error { return s.worker(ctx, i) })
	}
	g.Go(func() error { return s.scheduler(ctx) })
	err := g.Wait()
	s.alerts.Wait()
	return err
}

func (s *Server) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// worker runs the jobs of GPU set i one at a time.
func (s *Server) worker(ctx context.Context, set int) error {
	for {
		j, jctx, ok, err := s.claim(ctx, set)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Error("claim job", "gpu_set", set, "err", err)
		}
		if ok {
			s.runJob(ctx, jctx, set, j)
			s.poke() // another worker may be idle while jobs wait
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-time.After(2 * time.Second):
		}
	}
}

// claim takes the job set i runs next: one it was running when the
// service stopped, else the oldest queued one.
func (s *Server) claim(ctx context.Context, set int) (store.Job, context.Context, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return store.Job{}, nil, false, ctx.Err()
	}
	js, err := s.db.Jobs(ctx)
	if err != nil {
		return store.Job{}, nil, false, err
	}
	pick := -1
	for i, j := range js {
		if _, busy := s.cancels[j.ID]; busy {
			continue
		}
		if j.State == store.JobRunning && (j.GPUSet == set || j.GPUSet >= len(s.cfg.GPUSets)) {
			pick = i
			break
		}
		if j.State == store.JobQueued && pick < 0 {
			pick = i
		}
	}
	if pick < 0 {
		return store.Job{}, nil, false, nil
	}
	j := js[pick]
	j.State, j.GPUSet, j.Runs = store.JobRunning, set, j.Runs+1
	if j.Started.IsZero() {
		j.Started = time.Now().UTC()
	}
	if err := s.db.UpdateJob(ctx, j); err != nil {
		return store.Job{}, nil, false, err
	}
	jctx, cancel := context.WithCancelCause(ctx)
	s.cancels[j.ID] = func() { cancel(errCancelled) }
	s.refreshQueueLocked(ctx, js, j)
	return j, jctx, true, nil
}

// runJob runs one claimed job to its end state.
func (s *Server) runJob(ctx, jctx context.Context, set int, j store.Job) {
	s.metrics.running.Inc()
	defer s.metrics.running.Dec()
	log := s.log.With("job", j.ID, "gpu_set", set, "run", j.Runs)
	log.Info("job start")
	var err error
	if j.Kind == KindBench {
		err = s.benchmark(jctx, set, &j, log)
	} else {
		err = s.search(jctx, set, &j, log)
	}
	s.mu.Lock()
	delete(s.cancels, j.ID)
	s.mu.Unlock()
	cause := context.Cause(jctx)
	switch {
	case errors.Is(cause, errCancelled):
		j.State = store.JobCancelled
	case ctx.Err() != nil:
		// The service stops: the job stays running, resumed at the next
		// start (its trial is marked interrupted).
		log.Info("job stopped with the service; resumed at the next start")
		s.hub.publish(Event{Job: j.ID, State: store.JobRunning, Study: j.Study, Error: "service stopped"})
		return
	case err != nil:
		j.State, j.Error = store.JobFailed, err.Error()
	default:
		j.State = store.JobDone
	}
	j.Ended = time.Now().UTC()
	if j.Schedule != "" {
		s.scheduledEnd(context.WithoutCancel(ctx), &j, err)
	}
	// The job's own context may be cancelled: record its end regardless.
	if uerr := s.db.UpdateJob(context.WithoutCancel(ctx), j); uerr != nil {
		log.Error("record job end", "err", uerr)
	}
	log.Info("job end", "state", j.State, "err", err)
	s.hub.publish(Event{Job: j.ID, State: j.State, Study: j.Study, Error: j.Error})
}

// search runs a search job as `tuner search` runs it: a resumed run (the
// job ran before) continues its study with --resume semantics.
func (s *Server) search(ctx context.Context, set int, j *store.Job, log interface {
	Info(string, ...any)
}) error {
	spec := tuner.DefaultSearchSpec()
	if err := json.Unmarshal(j.Spec, &spec); err != nil {
		return fmt.Errorf("job %s: spec: %w", j.ID, err)
	}
	if j.Runs > 1 {
		spec.Resume = true
	}
	ss, err := spec.Resolve()
	if err != nil {
		return err
	}
	env := s.gpuEnv(set)
	var study string
	run, err := ss.Start(ctx, s.db, tuner.StartConfig{
		Logger:  s.log.With("job", j.ID),
		Env:     env,
		DataDir: s.cfg.DataDir,
		Shared:  s.cfg.Shared,
		OnStatus: func(st tuner.Status) {
			s.hub.publish(statusEvent(j.ID, study, st))
			if !math.IsNaN(st.Best) {
				s.metrics.best.WithLabelValues(study).Set(st.Best)
			}
		},
		OnTrial:  s.metrics.trial,
		Observer: s.metrics,
	})
	if err != nil {
		return err
	}
	defer run.Close()
	study = run.Study.ID
	if j.Study != study {
		j.Study = study
		if err := s.db.UpdateJob(ctx, *j); err != nil {
			return err
		}
	}
	log.Info("job study", "study", study, "resume", spec.Resume)
	s.hub.publish(Event{Job: j.ID, State: store.JobRunning, Study: study})
	_, err = run.Loop.Run(ctx)
	return err
}

// gpuEnv is the engine environment of GPU set i.
func (s *Server) gpuEnv(set int) []string {
	if v := s.cfg.GPUSets[set]; v != "" {
		return []string{"CUDA_VISIBLE_DEVICES=" + v}
	}
	return nil
}

// refreshQueue sets the queue-length gauge.
func (s *Server) refreshQueue(ctx context.Context) {
	js, err := s.db.Jobs(ctx)
	if err != nil {
		return
	}
	s.refreshQueueLocked(ctx, js, store.Job{})
}

func (s *Server) refreshQueueLocked(_ context.Context, js []store.Job, claimed store.Job) {
	n := 0
	for _, j := range js {
		if j.State == store.JobQueued && j.ID != claimed.ID {
			n++
		}
	}
	s.metrics.queue.Set(float64(n))
}
