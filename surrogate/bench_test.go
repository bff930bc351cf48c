package surrogate

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/vllm-tuner/tuner/internal/benchcpu"
	"github.com/vllm-tuner/tuner/spaces"
)

var benchData struct {
	once    sync.Once
	m       *Matrix
	samples []Sample
	cands   []spaces.Config
	tg      spaces.Target
}

// benchMatrix is 1,000 simulated trials of Llama-3.1-8B on one H100.
func benchMatrix(b *testing.B) *Matrix {
	benchData.once.Do(func() {
		tg := mustTarget(b, "Llama-3.1-8B", "H100", 1)
		ss := simSamples(b, tg, chatWorkload(100), 1000, 5, nil)
		benchData.m, benchData.samples, benchData.tg = simMatrix(b, tg, ss), ss, tg
		s := resolved(b, tg)
		r := rand.New(rand.NewPCG(9, 9))
		for range 10000 {
			benchData.cands = append(benchData.cands, randomConfig(b, s, r, nil))
		}
	})
	return benchData.m
}

// BenchmarkTrain1000 trains the default surrogate (5 members x 3 objectives
// + classifier) on 1,000 trials.
func BenchmarkTrain1000(b *testing.B) {
	m := benchMatrix(b)
	b.ResetTimer()
	c0 := benchcpu.Start()
	for range b.N {
		if _, err := TrainMatrix(m, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
	c0.Report(b)
}

var bench10k struct {
	once sync.Once
	m    *Matrix
}

// BenchmarkTrain10000 trains the default surrogate on 10,000 distinct
// simulated trials (a long multi-worker study; the goal is <= 2 s).
func BenchmarkTrain10000(b *testing.B) {
	bench10k.once.Do(func() {
		tg := mustTarget(b, "Llama-3.1-8B", "H100", 1)
		seen := map[string]bool{}
		ss := simSamples(b, tg, chatWorkload(100), 10000, 6, func(c spaces.Config) bool {
			if seen[c.ID()] {
				return false
			}
			seen[c.ID()] = true
			return true
		})
		bench10k.m = simMatrix(b, tg, ss)
	})
	b.ResetTimer()
	c0 := benchcpu.Start()
	for range b.N {
		if _, err := TrainMatrix(bench10k.m, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
	c0.Report(b)
}

// BenchmarkPredict10000 scores 10,000 encoded candidates.
func BenchmarkPredict10000(b *testing.B) {
	m := benchMatrix(b)
	s, err := TrainMatrix(m, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	x := s.Schema.Encoder(benchData.tg, chatWorkload(100)).EncodeAll(benchData.cands)
	b.ResetTimer()
	c0 := benchcpu.Start()
	for range b.N {
		s.Predict(x)
	}
	c0.Report(b)
}

// BenchmarkEncodePredict10000 encodes and scores 10,000 candidate configs.
func BenchmarkEncodePredict10000(b *testing.B) {
	m := benchMatrix(b)
	s, err := TrainMatrix(m, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	enc := s.Schema.Encoder(benchData.tg, chatWorkload(100))
	b.ResetTimer()
	c0 := benchcpu.Start()
	for range b.N {
		s.Predict(enc.EncodeAll(benchData.cands))
	}
	c0.Report(b)
}

// BenchmarkEncode10000 encodes 10,000 candidate configs.
func BenchmarkEncode10000(b *testing.B) {
	benchMatrix(b)
	enc := NewSchema(resolved(b, benchData.tg)).Encoder(benchData.tg, chatWorkload(100))
	b.ResetTimer()
	c0 := benchcpu.Start()
	for range b.N {
		enc.EncodeAll(benchData.cands)
	}
	c0.Report(b)
}
