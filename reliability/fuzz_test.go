package reliability

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Fuzz targets for the parsers whose packages have none: the SLO parser,
// the engine-log classifier and fact parser, secret redaction, the raw data
// reader, the profile (catalog) loader and version comparison. Each runs in
// `make fuzz`; the seed corpus is here and under testdata/fuzz/.

// FuzzParseSLO: any string parses or fails with a message; what parses
// renders (String) to a form that parses back to the same bounds.
func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"", "ttft_p99<=800ms,tpot_p99<=60ms", "output_throughput>=1000", "e2el_p50<2s", "itl_p95<=250us",
		"ttft_p99<=abc", "nosuch<=1", "ttft_p99", "ttft_p99<=-1ms", "ttft_p99<=1e12s", " tpot_p99 <= 5 ms ", "a<=b,c>=d", "ttft_p99<=NaN", "error_rate<=1%", "error_rate<=150%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := trial.ParseSLO(s)
		if err != nil {
			if !strings.Contains(err.Error(), "slo term") {
				t.Fatalf("error %q does not say which term", err)
			}
			return
		}
		for _, b := range slo {
			if math.IsNaN(b.Limit) || math.IsInf(b.Limit, 0) || b.Limit < 0 {
				t.Fatalf("bound %+v accepted", b)
			}
		}
		again, err := trial.ParseSLO(slo.String())
		if err != nil {
			t.Fatalf("%q parsed, its rendering %q does not: %v", s, slo.String(), err)
		}
		if len(again) != len(slo) {
			t.Fatalf("round trip of %q: %d bounds, want %d", s, len(again), len(slo))
		}
		for i := range slo {
			if again[i] != slo[i] {
				t.Fatalf("round trip of %q changed bound %d: %+v -> %+v", s, i, slo[i], again[i])
			}
		}
	})
}

var sentinels = []error{trial.ErrOOM, trial.ErrKVTooSmall, trial.ErrInvalidArgument, trial.ErrStartupTimeout, trial.ErrCrashed, trial.ErrUnhealthy}

// hfToken is a Hugging Face token as Redact must mask it.
var hfToken = regexp.MustCompile(`\bhf_[A-Za-z0-9]{16,}`)

// FuzzClassify: any log and exit status give a classified *EngineError
// whose kind is one of the sentinels, whose deciding line comes from the log
// and is bounded, and whose line and tail carry no Hugging Face token.
func FuzzClassify(f *testing.F) {
	for _, name := range []string{"oom.log", "kv.log", "ok.log"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "logs", name)); err == nil {
			f.Add(b, 1, false)
		}
	}
	f.Add([]byte("vllm serve: error: unrecognized arguments: --x\n"), 2, false)
	f.Add([]byte("ERROR torch.OutOfMemoryError: CUDA out of memory token=hf_abcdefghijklmnopqrstuv\n"), 1, true)
	f.Add([]byte("\n\n\r\n"), -1, true)
	f.Add([]byte(strings.Repeat("x", 1000)+"EngineDeadError"), 0, true)
	f.Fuzz(func(t *testing.T, log []byte, code int, duringLoad bool) {
		e := trial.Classify(log, code, duringLoad)
		if e == nil {
			t.Fatal("nil error")
		}
		known := false
		for _, s := range sentinels {
			if errors.Is(e, s) {
				known = true
			}
		}
		if !known {
			t.Fatalf("kind %v is not a sentinel", e.Kind)
		}
		if len(e.Line) > 403 {
			t.Fatalf("line of %d bytes", len(e.Line))
		}
		if len(e.Tail) > 20 {
			t.Fatalf("tail of %d lines", len(e.Tail))
		}
		for _, l := range append([]string{e.Line}, e.Tail...) {
			if hfToken.MatchString(l) {
				t.Fatalf("unmasked token in %q", l)
			}
		}
		_ = e.Error()
		facts := trial.ParseLogFacts(log)
		for _, v := range []float64{facts.AvailableKVGiB, facts.MaxConcurrency, facts.WeightsGiB, facts.GraphGiB, facts.InitEngineS} {
			if math.IsNaN(v) {
				t.Fatalf("NaN fact from the log: %+v", facts)
			}
		}
	})
}

// FuzzRedact: no Hugging Face token and no value of a token=/api_key=
// assignment survives, and masking twice changes nothing.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz", "api_key: s3cr3t", `{"password": "p"}`, "plain line", "hf_short", "token=hf_aaaaaaaaaaaaaaaaaaaa,x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := trial.Redact(s)
		if hfToken.MatchString(r) {
			t.Fatalf("Redact(%q) = %q keeps a token", s, r)
		}
		if r2 := trial.Redact(r); r2 != r {
			t.Fatalf("Redact not idempotent: %q -> %q -> %q", s, r, r2)
		}
	})
}

// FuzzDecodeRaw: the raw data reader returns records or an error for any
// bytes, and records it accepts sit in a declared level.
func FuzzDecodeRaw(f *testing.F) {
	p := filepath.Join(f.TempDir(), "seed.raw.jsonl.gz")
	recs := []trial.Record{
		{Index: 0, PromptLen: 10, OutputLen: 3, Start: time.Millisecond, Chunks: []time.Duration{2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}, End: 4 * time.Millisecond},
		{Index: 1, PromptLen: 12, Err: "HTTP 500", Warmup: true},
	}
	if err := trial.WriteRaw(p, trial.RawHeader{ConfigID: "abc", Workload: "w", Levels: []trial.RawLevel{{Concurrency: 4, Records: recs}}}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte(`{"version":1,"levels":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := trial.DecodeRaw(bytes.NewReader(b))
		if err != nil {
			return
		}
		if h.Version != trial.RawVersion {
			t.Fatalf("accepted version %d", h.Version)
		}
	})
}

// FuzzCatalog: a --profiles file loads or fails with an error naming the
// file; what loads has positive memory for every GPU.
func FuzzCatalog(f *testing.F) {
	if b, err := os.ReadFile("../spaces/catalog.yaml"); err == nil {
		f.Add(b)
	}
	for _, name := range []string{"profiles-negative.yaml", "profiles-syntax.yaml"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "bad", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("gpus:\n  - name: X\n    memory_gib: 10\n"))
	f.Add([]byte("models:\n  - name: M\n    params_b: 1\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "profiles.yaml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := spaces.LoadCatalogFile(p)
		if err != nil {
			if !strings.Contains(err.Error(), "profiles.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, g := range c.GPUs {
			if !(g.MemoryGiB > 0) {
				t.Fatalf("GPU %q with memory %v accepted", g.Name, g.MemoryGiB)
			}
		}
	})
}

// FuzzCompareVersions: comparison is antisymmetric and reflexive.
func FuzzCompareVersions(f *testing.F) {
	f.Add("0.10.2", "0.11")
	f.Add("0.11.0rc1", "0.11.0+cu128")
	f.Add("1", "1.0.0")
	f.Add("", "x.y")
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, err1 := spaces.CompareVersions(a, b)
		ba, err2 := spaces.CompareVersions(b, a)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ by order: %v / %v", err1, err2)
		}
		if err1 == nil && ab != -ba {
			t.Fatalf("compare(%q,%q)=%d but compare(%q,%q)=%d", a, b, ab, b, a, ba)
		}
		if aa, err := spaces.CompareVersions(a, a); err == nil && aa != 0 {
			t.Fatalf("compare(%q,%q)=%d", a, a, aa)
		}
	})
}
