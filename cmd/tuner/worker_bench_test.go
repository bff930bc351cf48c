package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// BenchmarkWorkers runs one study of TUNER_BENCH_TRIALS (default 48)
// sim-virtual search trials, paced to their simulated time x
// TUNER_BENCH_TIME_SCALE (default 0.1: engine-bound trials of 2-6 s), with
// 1, 2 and 4 `tuner search` processes against one PostgreSQL database, and
// reports trials per hour of wall time (first claim to last end), that
// rate over the rate of workers whose engines never idle (engine-busy), and the
// hypervolume of the measured SLO-feasible front after 24 and 48 search
// trials (in the order they were claimed; reference: zero throughput, the
// SLO's latency bound, the GPU's memory). Run it once:
//
//	go test -run '^$' -bench Workers -benchtime 1x -timeout 30m ./cmd/tuner
func BenchmarkWorkers(b *testing.B) {
	trials, scale := 48, "0.1"
	if v, err := strconv.Atoi(os.Getenv("TUNER_BENCH_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	if v := os.Getenv("TUNER_BENCH_TIME_SCALE"); v != "" {
		scale = v
	}
	tunerBin, _ := binaries(b)
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			for range b.N {
				url := pgtest.DB(b)
				args := virtualArgs(url, "--trials", strconv.Itoa(trials), "--repeats", "1", "--patience", "0",
					"--engine-arg=--time-scale="+scale, "--lease", "10s", "--seed", "7")
				var ws []*worker
				for i := range n {
					ws = append(ws, startWorker(b, tunerBin, fmt.Sprintf("b%d", i+1), args...))
				}
				for _, w := range ws {
					if code := w.Wait(b, 30*time.Minute); code != 0 {
						b.Fatalf("worker %s: exit %d\n%s", w.name, code, w.Stderr.String())
					}
				}
				f, err := strconv.ParseFloat(scale, 64)
				if err != nil {
					b.Fatal(err)
				}
				perHour, engineS, hv := studyFigures(b, url)
				b.ReportMetric(perHour, "trials/h")
				// The rate if every worker's engine were busy all the time:
				// the trials' paced simulated time is the engine's share.
				ideal := float64(n) * 3600 / (engineS * f / float64(trials))
				b.ReportMetric(perHour/ideal, "engine-busy")
				for _, k := range []int{24, 48} {
					if v, ok := hv[k]; ok {
						b.ReportMetric(v, fmt.Sprintf("HV@%d", k))
					}
				}
			}
		})
	}
}

// studyFigures reads the study: search trials per hour of wall time, their
// simulated seconds (startup + measurement), and the measured front's
// hypervolume after 24 and 48 search trials.
func studyFigures(b *testing.B, url string) (float64, float64, map[int]float64) {
	ts := studyTrials(b, url)
	slo, err := trial.ParseSLO(testSLO)
	if err != nil {
		b.Fatal(err)
	}
	m := tuner.DefaultMetrics()
	objs := m.Objectives()
	ref := []float64{0, slo[0].Limit, 80}
	var first, last time.Time
	var pts [][]float64
	hv := map[int]float64{}
	n, simS := 0, 0.0
	for _, t := range ts {
		if t.Repeat != 0 || t.State == store.StateInterrupted || t.State == store.StateRunning {
			continue
		}
		if first.IsZero() || t.Started.Before(first) {
			first = t.Started
		}
		if t.Ended.After(last) {
			last = t.Ended
		}
		n++
		if t.Result != nil {
			simS += t.Result.Phases.TotalS
		}
		if v, ok := m.Vector(t.Result); ok {
			if pm := t.Result.Metrics(); pm != nil {
				if met, _ := slo.Check(pm); met && !slices.ContainsFunc(v, math.IsNaN) {
					pts = append(pts, v)
				}
			}
		}
		if n == 24 || n == 48 {
			h, err := pareto.Hypervolume(pts, objs.Directions(), ref)
			if err != nil {
				b.Fatal(err)
			}
			hv[n] = h
		}
	}
	return float64(n) / last.Sub(first).Hours(), simS, hv
}
