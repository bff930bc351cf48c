package spaces

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseSpace: no input may panic the loader, and an accepted file must
// resolve or fail cleanly.
func FuzzParseSpace(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add(defaultSpaceYAML)
	cat := DefaultCatalog()
	m, _ := cat.Model("Llama-3.1-8B")
	g, _ := cat.GPU("H100")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse("fuzz.yaml", b)
		if err != nil {
			return
		}
		r, err := s.Resolve(Target{Model: m, GPU: g, GPUCount: 2, MaxModelLen: 4096})
		if err != nil {
			return
		}
		c := r.DefaultConfig()
		_ = r.Validate(c)
		if back, err := r.ParseFlags(c.Flags()); err == nil {
			if n, err := r.Normalize(back); err == nil && !n.Equal(c) {
				t.Fatalf("flags round trip: %s -> %s", c, n)
			}
		}
	})
}

// FuzzExpr: parsing and evaluating arbitrary expressions never panics.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{
		"enable_chunked_prefill || max_num_batched_tokens >= max_model_len",
		"model.heads % tensor_parallel_size == 0",
		"contains(gpu.name, 'A100') && version_ge('0.12')",
		"-(-1) * 2 / 0 % 3", "((((a))))", "'x' == \"x\"",
	} {
		f.Add(s)
	}
	env := func(id string) (Value, bool) {
		switch id {
		case "gpu.name", "engine.version":
			return StringValue("0.11.0"), true
		case "enable_chunked_prefill":
			return BoolValue(false), true
		}
		return IntValue(len(id)), true
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseExpr(src)
		if err != nil {
			return
		}
		_, _ = e.Eval(env)
		_, _ = e.EvalBool(env)
		_ = e.Idents()
	})
}

// FuzzParseFlags: arbitrary CLI arguments never panic the flag parser.
func FuzzParseFlags(f *testing.F) {
	f.Add("--max-num-seqs\x0064\x00--no-enable-prefix-caching")
	f.Add("--max-num-batched-tokens=16k")
	s, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		var args []string
		start := 0
		for i := 0; i <= len(joined); i++ {
			if i == len(joined) || joined[i] == 0 {
				args = append(args, joined[start:i])
				start = i + 1
			}
		}
		_, _ = s.ParseFlags(args)
	})
}
