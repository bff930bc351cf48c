package trial

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
)

func TestBuiltinWorkloads(t *testing.T) {
	names := BuiltinWorkloads()
	want := []string{"chat", "long-prefill", "short-high-concurrency"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("builtins = %v, want %v", names, want)
	}
	for _, n := range names {
		w, err := LoadWorkload(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		// Cheap trials, but a closed loop gets three rounds of its
		// concurrency (768 at 256) to reach a steady state.
		if w.Name != n || w.NumRequests < 100 || w.NumRequests > 800 {
			t.Errorf("%s: %+v", n, w)
		}
		if len(w.Requests()) != w.NumRequests+w.Warmup {
			t.Errorf("%s: %d requests", n, len(w.Requests()))
		}
	}
	shc, _ := LoadWorkload("short-high-concurrency")
	if !shc.Arrival.Closed() || shc.Arrival.Concurrency < 128 || shc.Prompt.Value != 128 || shc.Output.Value != 64 {
		t.Errorf("short-high-concurrency = %+v", shc)
	}
	lp, _ := LoadWorkload("long-prefill")
	if lp.Prompt.Value != 8192 || lp.Output.Value != 512 {
		t.Errorf("long-prefill = %+v", lp)
	}
	if _, err := LoadWorkload("nope"); err == nil || !strings.Contains(err.Error(), "chat") {
		t.Errorf("unknown builtin: %v", err)
	}
}

func TestChatMixtureProportions(t *testing.T) {
	w, err := LoadWorkload("chat")
	if err != nil {
		t.Fatal(err)
	}
	w.NumRequests, w.Warmup = 20000, 0
	count := map[string]int{}
	var outSum float64
	specs := w.Requests()
	for _, s := range specs {
		count[s.Class()]++
		outSum += float64(s.OutputLen)
		if s.OutputLen < 128 || s.OutputLen > 512 {
			t.Fatalf("output %d outside 128..512", s.OutputLen)
		}
	}
	n := float64(len(specs))
	// Binomial std at n=20000 is < 0.4%; allow 1.5%.
	for c, want := range map[string]float64{"short": 0.6, "medium": 0.3, "long": 0.1} {
		if got := float64(count[c]) / n; math.Abs(got-want) > 0.015 {
			t.Errorf("class %s fraction %.3f, want %.2f", c, got, want)
		}
	}
	// Poisson arrivals at 8 req/s: the last offset is about n/8 s.
	last := specs[len(specs)-1].At.Seconds()
	if math.Abs(last-n/8)/(n/8) > 0.03 {
		t.Errorf("last arrival %.0fs, want about %.0fs", last, n/8)
	}
}

func TestParseWorkloadErrors(t *testing.T) {
	tests := []struct {
		name, yaml, field string
		line              int
	}{
		{"unknown field", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\nbogus: 3\n", "bogus", 6}, // the field is named, the file never quoted
		{"missing name", "prompt: {kind: fixed, value: 1}\n", "name", 0},
		{"bad kind", "name: x\nprompt:\n  kind: pareto\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n", "prompt.kind", 3},
		{"uniform", "name: x\nprompt: {kind: uniform, min: 5, max: 2}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n", "prompt", 2},
		{"mixture weight", "name: x\nprompt:\n  kind: mixture\n  mixture:\n    - weight: 0\n      dist: {kind: fixed, value: 3}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n", "prompt.mixture[0].weight", 5},
		{"closed no conc", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival:\n  kind: closed\nnum_requests: 1\n", "arrival.concurrency", 5},
		{"open no rate", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival:\n  kind: poisson\nnum_requests: 1\n", "arrival.rate", 5},
		{"gamma", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: gamma, rate: 2}\nnum_requests: 1\n", "arrival.burstiness", 4},
		{"no count", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\n", "num_requests", 0},
		{"duration", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nduration: soon\n", "duration", 5},
		{"slo", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\nslo: ttft<=3\n", "slo", 6},
		{"capacity needs slo", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed}\nnum_requests: 1\ncapacity: true\n", "capacity", 6},
		{"level", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\nlevels: [1, 2.5]\n", "levels[1]", 6},
		{"type", "name: x\nprompt: {kind: fixed, value: many}\n", "", 2},
		{"zipf exponent", "name: x\nprompt: {kind: zipf, min: 1, max: 100, exponent: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n", "prompt.exponent", 2},
		{"zipf range", "name: x\nprompt: {kind: zipf, min: 9, max: 3, exponent: 2}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n", "prompt", 2},
		{"think", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\nthink_ms: {kind: uniform, min: 3, max: 1}\n", "think_ms", 6},
		{"endpoint", "name: x\nprompt: {kind: fixed, value: 1}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\nendpoint: responses\n", "endpoint", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWorkload("w.yaml", []byte(tt.yaml))
			var fe *spaces.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *spaces.FileError", err)
			}
			if fe.File != "w.yaml" || fe.Field != tt.field || (tt.line > 0 && fe.Line != tt.line) {
				t.Errorf("error %q: file %q line %d field %q, want line %d field %q", err, fe.File, fe.Line, fe.Field, tt.line, tt.field)
			}
		})
	}
}

func TestParseWorkloadFull(t *testing.T) {
	y := `
name: custom
prompt: {kind: normal, mean: 300, std: 50, min: 10}
output: {kind: fixed, value: 32}
prefix_len: 64
arrival: {kind: closed, concurrency: 8}
duration: 30s
warmup: 5
seed: 9
slo: ttft_p99<=500ms,tpot_p99<=50ms
levels: [4, 8, 16]
capacity: true
endpoint: chat
`
	w, err := ParseWorkload("c.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if w.Duration != 30*time.Second || w.PrefixLen != 64 || len(w.SLO) != 2 || w.SLO[0].Limit != 500 || len(w.Levels) != 3 || !w.Capacity || w.Seed != 9 || w.Endpoint != EndpointChat {
		t.Errorf("workload = %+v", w)
	}
}

func TestShareGPT(t *testing.T) {
	w, err := LoadWorkload("testdata/sharegpt-workload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.ShareGPTPairs() != 3 {
		t.Fatalf("kept %d conversations, want 3", w.ShareGPTPairs())
	}
	seen := map[[2]int]bool{}
	for _, s := range w.Requests() {
		seen[[2]int{s.PromptLen, s.OutputLen}] = true
	}
	for _, want := range [][2]int{{100, 200}, {10, 500}, {1024, 1024}} {
		if !seen[want] {
			t.Errorf("pair %v never drawn (seen %v)", want, seen)
		}
	}
	if len(seen) != 3 {
		t.Errorf("drew pairs %v, want only the 3 kept", seen)
	}
	var empty Workload
	for _, bad := range []string{`{}`, `[{"conversations":[{"from":"human","value":"hi"}]}]`, `[{"conversations": 3}]`, `[`} {
		if err := empty.LoadShareGPT(strings.NewReader(bad)); err == nil {
			t.Errorf("LoadShareGPT(%q) accepted", bad)
		}
	}
}

func FuzzParseWorkload(f *testing.F) {
	for _, n := range BuiltinWorkloads() {
		b, _ := builtinWorkloads.ReadFile("workloads/" + n + ".yaml")
		f.Add(b)
	}
	f.Add([]byte("name: x\nprompt: {kind: mixture, mixture: [{weight: 1, dist: {kind: fixed, value: 2}}]}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 1\n"))
	f.Add([]byte("name: x\nprompt: {kind: fixed, value: 2}\noutput: {kind: fixed, value: 1}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 3\ntenants: [{name: a, weight: 1}, {name: b, weight: 2, rank: 8, path: /p}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ParseWorkload("f.yaml", b)
		if err != nil {
			var fe *spaces.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error not a FileError: %v", err)
			}
			return
		}
		// A valid workload generates valid requests (bounded to stay fast).
		w.NumRequests, w.Warmup = min(w.NumRequests, 50), min(w.Warmup, 5)
		if w.ShareGPT != "" {
			return // not loaded here
		}
		names := map[string]bool{}
		for _, tn := range w.Tenants {
			names[tn.Name] = true
		}
		for _, s := range w.Requests() {
			if s.PromptLen < 1 || s.OutputLen < 1 || s.At < 0 {
				t.Fatalf("bad request %+v from %+v", s, w)
			}
			if len(w.Tenants) > 0 && !names[s.Tenant] || len(w.Tenants) == 0 && s.Tenant != "" {
				t.Fatalf("request tenant %q not among %v", s.Tenant, w.Tenants)
			}
		}
	})
}

func FuzzShareGPT(f *testing.F) {
	f.Add([]byte(`[{"conversations":[{"from":"human","value":"aaaaaaaaaaaaaaaaaaaa"},{"from":"gpt","value":"bbbbbbbbbbbbbbbbbbbbbb"}]}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var w Workload
		if err := w.LoadShareGPT(strings.NewReader(string(b))); err != nil {
			return
		}
		for _, p := range w.sharegpt {
			if p[0] < 4 || p[1] < 4 || p[0] > 1024 || p[0]+p[1] > 2048 {
				t.Fatalf("pair %v passed the filter", p)
			}
		}
	})
}

// Zipf lengths stay in [min, max], the smallest is the most frequent (its
// share is 1/H(n, s)), and the sample mean matches MeanValue.
func TestZipfLengths(t *testing.T) {
	w, err := ParseWorkload("z.yaml", []byte("name: z\nprompt: {kind: zipf, min: 10, max: 1000, exponent: 1.5}\noutput: {kind: fixed, value: 4}\narrival: {kind: closed, concurrency: 1}\nnum_requests: 40000\nseed: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	var h float64
	for k := 1; k <= 991; k++ {
		h += math.Pow(float64(k), -1.5)
	}
	var sum float64
	first := 0
	for _, s := range w.Requests() {
		if s.PromptLen < 10 || s.PromptLen > 1000 {
			t.Fatalf("zipf length %d outside [10, 1000]", s.PromptLen)
		}
		if s.PromptLen == 10 {
			first++
		}
		sum += float64(s.PromptLen)
	}
	n := float64(w.NumRequests)
	if got, want := float64(first)/n, 1/h; math.Abs(got-want) > 0.01 {
		t.Errorf("share of the minimum %.3f, want %.3f", got, want)
	}
	// The mean of a heavy tail converges slowly: 10% relative.
	if got, want := sum/n, w.Prompt.MeanValue(); math.Abs(got-want)/want > 0.1 {
		t.Errorf("zipf sample mean %.1f, MeanValue %.1f", got, want)
	}
}

// Think time is drawn per closed-loop request only when set, so workloads
// without it keep their request sequences.
func TestThinkTime(t *testing.T) {
	base := "name: t\nprompt: {kind: uniform, min: 1, max: 100}\noutput: {kind: fixed, value: 4}\narrival: {kind: closed, concurrency: 2}\nnum_requests: 200\nseed: 5\n"
	plain, err := ParseWorkload("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	think, err := ParseWorkload("t.yaml", []byte(base+"think_ms: {kind: uniform, min: 1000, max: 3000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := plain.Requests(), think.Requests()
	if a[0].PromptLen != b[0].PromptLen || a[0].Think != 0 {
		t.Errorf("first request changed by think time: %+v vs %+v", a[0], b[0])
	}
	for _, s := range b {
		if s.Think < time.Second || s.Think > 3*time.Second {
			t.Fatalf("think %v outside 1-3 s", s.Think)
		}
	}
}
