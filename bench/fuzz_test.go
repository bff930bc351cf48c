package bench

import (
	"errors"
	"os"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseMatrix: any input parses or fails with a *spaces.FileError
// naming the file; a parsed matrix has named cells with request sequences.
func FuzzParseMatrix(f *testing.F) {
	for _, p := range []string{"../examples/matrix-smoke.yaml", "../examples/matrix-platform.yaml", "../examples/matrix-sharegpt.yaml"} {
		f.Add(mustRead(f, p))
	}
	f.Add([]byte("name: x\ncross: {prompt: [a]}\ndistributions: {a: {kind: fixed, value: 1}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMatrix("f.yaml", b)
		if err != nil {
			var fe *spaces.FileError
			if !errors.As(err, &fe) || fe.File != "f.yaml" {
				t.Fatalf("error %v (%T) is not a FileError of f.yaml", err, err)
			}
			return
		}
		if len(m.Cells) == 0 || len(m.Cells) > MaxCells {
			t.Fatalf("%d cells", len(m.Cells))
		}
		for _, c := range m.Cells {
			if c.Name == "" {
				t.Fatal("unnamed cell")
			}
			w := c.Workload
			if w.NumRequests > 2000 {
				w.NumRequests = 2000
			}
			w.Warmup = min(w.Warmup, 100)
			for _, s := range w.Requests() {
				if s.PromptLen < 1 || s.OutputLen < 1 {
					t.Fatalf("cell %s: request %+v", c.Name, s)
				}
			}
		}
	})
}
