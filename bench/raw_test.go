package bench

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// synthetic draws n requests shaped like a closed-loop level of a chat
// workload: a 60/30/10 prompt mix, 64-512 output tokens, TTFT 20-500 ms,
// TPOT 8-40 ms, a few errors.
func synthetic(n int, seed uint64) []Request {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]Request, n)
	var start time.Duration
	us := func(ms float64) time.Duration { return time.Duration(ms*1000) * time.Microsecond }
	for i := range out {
		start += us(r.ExpFloat64() * 25)
		p := 128
		switch u := r.Float64(); {
		case u > 0.9:
			p = 8192
		case u > 0.6:
			p = 1024
		}
		o := 64 + r.IntN(449)
		ttft := 20 + r.Float64()*480
		tpot := 8 + r.Float64()*32
		q := Request{Level: i * 4 / n, Index: i, Start: start, Prompt: p, Output: o, TTFT: us(ttft), E2EL: us(ttft + tpot*float64(o-1)),
			ITL: ITLSummary{Mean: us(tpot), P50: us(tpot * 0.95), P99: us(tpot * 3), Max: us(tpot * 5)}, Warmup: i < 16}
		if r.IntN(200) == 0 {
			q = Request{Level: q.Level, Index: i, Start: start, Prompt: p, E2EL: us(r.Float64() * 100), Err: []string{"timeout", "http_500", "reset"}[r.IntN(3)]}
		}
		out[i] = q
	}
	return out
}

func TestRawRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		reqs []Request
	}{
		{"empty", nil},
		{"one error", []Request{{Index: 3, Start: 5 * time.Millisecond, Prompt: 10, E2EL: time.Millisecond, Err: "refused"}}},
		{"synthetic", synthetic(5000, 1)},
		{"out of order indices", []Request{{Index: 9, Output: 1, TTFT: time.Millisecond, E2EL: time.Millisecond}, {Index: 2, Level: 1, Output: 3, TTFT: 2 * time.Millisecond, E2EL: 9 * time.Millisecond, Warmup: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeRaw(tt.reqs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeRaw(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.reqs) || (len(got) > 0 && !reflect.DeepEqual(got, tt.reqs)) {
				t.Fatalf("round trip changed the requests:\n got %+v\nwant %+v", got[:min(3, len(got))], tt.reqs[:min(3, len(tt.reqs))])
			}
		})
	}
	if _, err := DecodeRaw([]byte("not gzip")); !errors.Is(err, ErrRawData) {
		t.Errorf("garbage: %v", err)
	}
	b, _ := EncodeRaw(synthetic(100, 2))
	if _, err := DecodeRaw(b[:len(b)/2]); err == nil {
		t.Error("truncated raw data decoded")
	}
}

// The raw data of a run stays well under the 60 bytes a request the issue
// allows (BenchmarkRawBytesPerRequest reports the figure).
func TestRawSize(t *testing.T) {
	reqs := synthetic(20000, 3)
	b, err := EncodeRaw(reqs)
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(len(b)) / float64(len(reqs)); per >= 60 {
		t.Errorf("%.1f bytes a request, want < 60", per)
	}
}

// FromRecord keeps what the metrics need: TTFT, E2EL, tokens, the ITL
// summary, error classes.
func TestFromRecord(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	rec := trial.Record{Index: 4, PromptLen: 300, OutputLen: 5, Start: ms(2.0004), Chunks: []time.Duration{ms(10), ms(12), ms(13), ms(20), ms(21)}, End: ms(21)}
	r := FromRecord(1, &rec)
	want := Request{Level: 1, Index: 4, Start: ms(2), Prompt: 300, Output: 5, TTFT: ms(10), E2EL: ms(21),
		ITL: ITLSummary{Mean: ms(2.75), P50: ms(1.5), P99: ms(6.85), Max: ms(7)}}
	if r != want {
		t.Errorf("FromRecord = %+v, want %+v", r, want)
	}
	if d, _ := r.TPOT(); d != ms(2.75) {
		t.Errorf("TPOT %v", d)
	}
	// Classes are the trial's (trial.RequestErrorClass); success is "".
	for msg, class := range map[string]string{"": "", "timeout": "timeout", "http 503: busy": "http_503", "Post x: dial tcp: connect: connection refused": "refused",
		"stream: unexpected EOF": "stream", "malformed chunk: x": "malformed", "engine error: oom": "engine_error", "weird": "other"} {
		if got := errorClass(msg); got != class {
			t.Errorf("errorClass(%q) = %q, want %q", msg, got, class)
		}
	}
}

func FuzzDecodeRaw(f *testing.F) {
	b, _ := EncodeRaw(synthetic(50, 4))
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := DecodeRaw(b)
		if err != nil {
			return
		}
		again, err := EncodeRaw(reqs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRaw(again)
		if err != nil || !reflect.DeepEqual(back, reqs) && len(reqs) > 0 {
			t.Fatalf("re-encoding changed the data: %v", err)
		}
	})
}

func BenchmarkRawBytesPerRequest(b *testing.B) {
	reqs := synthetic(100000, 5)
	var n int
	for b.Loop() {
		raw, err := EncodeRaw(reqs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(raw)
	}
	b.ReportMetric(float64(n)/float64(len(reqs)), "bytes/req")
}

// BenchmarkReport1M is report generation from 1,000,000 stored raw
// requests: decode, summarise each level (percentiles, throughputs,
// buckets) and render the tables. Target: under 2 s and 1 GiB.
func BenchmarkReport1M(b *testing.B) {
	reqs := synthetic(1_000_000, 6)
	raw, err := EncodeRaw(reqs)
	if err != nil {
		b.Fatal(err)
	}
	reqs = nil
	slo, _ := trial.ParseSLO("ttft_p99<=2s,tpot_p99<=100ms")
	b.ReportMetric(float64(len(raw))/1e6, "bytes/req")
	b.ResetTimer()
	for b.Loop() {
		got, err := DecodeRaw(raw)
		if err != nil {
			b.Fatal(err)
		}
		cell := ReportCell("c", got, slo)
		run := store.Run{ID: "r1", Cells: []store.CellResult{cell}}
		var buf bytes.Buffer
		if err := WriteRun(&buf, &run, "text"); err != nil || !strings.Contains(buf.String(), "c=") {
			b.Fatalf("report: %v", err)
		}
	}
}

// Samples gives the measured successful requests' values of one level, the
// same ones Summarize aggregates.
func TestSamples(t *testing.T) {
	reqs := synthetic(4000, 7)
	for _, metric := range []string{"ttft", "tpot", "itl", "e2el"} {
		var lr []Request
		for _, r := range reqs {
			if r.Level == 1 {
				lr = append(lr, r)
			}
		}
		xs := Samples(reqs, 1, metric)
		m := Summarize(lr, nil)
		d := map[string]trial.Dist{"ttft": m.TTFT, "tpot": m.TPOT, "itl": m.ITL, "e2el": m.E2EL}[metric]
		if got := trial.Distribution(xs); got.Median != d.Median || got.P99 != d.P99 || len(xs) == 0 {
			t.Errorf("%s: samples give median %v p99 %v, Summarize %v %v", metric, got.Median, got.P99, d.Median, d.P99)
		}
	}
	if xs := Samples(reqs, 9, "ttft"); xs != nil {
		t.Errorf("no level 9: %v", xs)
	}
}
