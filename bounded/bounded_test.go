package bounded_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/bounded/boundedtest"
)

const maxExtra = 64 << 20

func TestHostileRefused(t *testing.T) {
	want := map[string]string{
		"deep-100k":   "doc.yaml:1: nesting depth over the limit of 64",
		"deep-32k":    "doc.yaml:1: nesting depth over the limit of 64",
		"string-50mb": "doc.yaml: size over the limit of 524288 bytes",
		"alias-bomb":  "doc.yaml:5: node count with aliases expanded over the limit of 20000",
	}
	for name, doc := range boundedtest.Hostile() {
		t.Run(name, func(t *testing.T) {
			var err error
			var v any
			n := boundedtest.Allocated(func() { err = bounded.DecodeYAML("doc.yaml", doc, &v) })
			if !errors.Is(err, bounded.ErrLimit) {
				t.Fatalf("err = %v, want a limit error", err)
			}
			var le *bounded.LimitError
			if !errors.As(err, &le) || le.Source != "doc.yaml" {
				t.Fatalf("err = %#v, want a *LimitError naming doc.yaml", err)
			}
			if err.Error() != want[name] {
				t.Errorf("err = %q, want %q", err, want[name])
			}
			if n > maxExtra {
				t.Errorf("allocated %d bytes to refuse it, want < %d", n, maxExtra)
			}
			t.Logf("%s: %v (%d bytes allocated)", name, err, n)
		})
	}
}

func TestCheckYAML(t *testing.T) {
	l := bounded.Limits{Bytes: 1 << 20, Depth: 4, Nodes: 30, Aliases: 2}
	cases := []checkCase{
		{"flat", "a: 1\nb: [1, 2]\n", ""},
		{"block depth 4", "a:\n  b:\n    c:\n      d: 1\n", ""},
		{"block depth 5", "a:\n  b:\n    c:\n      d:\n        e: 1\n", "f:5: nesting depth over the limit of 4"},
		{"flow depth", "a: [[[[1]]]]\n", "f:1: nesting depth over the limit of 4"},
		{"compact sequences", "- - - - - x\n", "f:1: nesting depth over the limit of 4"},
		{"brackets in quotes", "a: \"[[[[[[\"\nb: '{{{{{{'\n", ""},
		{"brackets in a plain scalar", "a: x[[[[[[\n", ""},
		{"brackets in a comment", "a: 1 # [[[[[[\n# {{{{{{{\n", ""},
		{"brackets in a block scalar", "a: |\n  [[[[[[\n  {{{{{{\nb: 1\n", ""},
		{"multi-line quote", "a: \"x\n  [[[[[[[\n  y\"\nb: 1\n", ""},
		{"escaped quote", "a: \"x\\\"[[[[[[\"\nb: 'it''s [[[[[['\n", ""},
		{"nodes", "a: [" + strings.Repeat("1, ", 40) + "1]\n", "f:1: node count over the limit of 30"},
		{"aliases", "a: &x 1\nb: [*x, *x, *x]\n", "f:2: aliases over the limit of 2"},
		{"alias expanded", "a: &x [1,2,3,4,5,6,7,8,9,10,11,12]\nb: [*x, *x]\n", "f:2: node count with aliases expanded over the limit of 30"},
		{"alias fine", "a: &x [1, 2]\nb: [*x, *x]\n", ""},
		{"size", strings.Repeat("#", 2<<20), "f: size over the limit of 1048576 bytes"},
	}
	checkCases(t, "CheckYAML", bounded.CheckYAML, l, cases)
}

// checkCase is a document and the error a check gives it ("" = accepted).
type checkCase struct{ name, doc, want string }

// checkCases runs check (CheckYAML or CheckJSON) on each case as file "f".
func checkCases(t *testing.T, name string, check func(string, []byte, bounded.Limits) error, l bounded.Limits, cases []checkCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := check("f", []byte(tc.doc), l); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("%s = %q, want %q", name, got, tc.want)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	l := bounded.Limits{Bytes: 1 << 10, Depth: 3, Nodes: 10}
	checkCases(t, "CheckJSON", bounded.CheckJSON, l, []checkCase{
		{"flat", `{"a": [1, 2.5e3, true, null, "x"]}`, ""},
		{"depth", `{"a": [[[1]]]}`, "f:1: nesting depth over the limit of 3"},
		{"brackets in strings", `{"a": "[[[[[\"[[[["}`, ""},
		{"nodes", "[\n" + strings.Repeat("1,\n", 12) + "1]", "f:11: node count over the limit of 10"},
		{"size", `"` + strings.Repeat("x", 2000) + `"`, "f: size over the limit of 1024 bytes"},
	})
}

// Every YAML file the project ships passes the default limits.
func TestShippedFilesPass(t *testing.T) {
	var files []string
	for _, g := range []string{"../spaces/*.yaml", "../examples/*.yaml", "../trial/workloads/*.yaml", "../bench/tiers/*.yaml", "../examples/*/*.yaml"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d shipped YAML files, want the project's", len(files))
	}
	for _, f := range files {
		b, err := bounded.ReadFile(f, bounded.Default().Bytes)
		if err == nil {
			err = bounded.CheckYAML(f, b, bounded.Default())
		}
		if err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestReadFileRefusesBySize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(200 << 20); err != nil { // sparse: 200 MB on no disk
		t.Fatal(err)
	}
	f.Close()
	var rerr error
	n := boundedtest.Allocated(func() { _, rerr = bounded.ReadFile(p, bounded.ImportBytes) })
	if want := p + ": size over the limit of 67108864 bytes"; rerr == nil || rerr.Error() != want {
		t.Fatalf("ReadFile = %v, want %q", rerr, want)
	}
	if n > 1<<20 {
		t.Errorf("allocated %d bytes to refuse it by its size", n)
	}
	if _, err := bounded.ReadFile(t.TempDir(), 10); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadFile(dir) = %v", err)
	}
}

func TestDecodeYAMLAliasesWork(t *testing.T) {
	var v struct {
		A []int `yaml:"a"`
		B []int `yaml:"b"`
	}
	if err := bounded.DecodeYAML("f", []byte("a: &x [1, 2]\nb: *x\n"), &v, yaml.Strict()); err != nil {
		t.Fatal(err)
	}
	if len(v.B) != 2 || v.B[1] != 2 {
		t.Errorf("b = %v, want [1 2]", v.B)
	}
}

// BenchmarkRefuseHostile is the time to refuse each hostile document of
// issue 29 (it took 66 s and 15 GB for deep-100k before).
func BenchmarkRefuseHostile(b *testing.B) {
	for name, doc := range boundedtest.Hostile() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var v any
				if err := bounded.DecodeYAML("doc.yaml", doc, &v); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

func FuzzCheckYAML(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: [1, {b: 'x'}]\n", "a: |\n  x\nb: \"y\\\"\"\n", "a: &x [1]\nb: *x\n", "- - x\n"} {
		f.Add([]byte(s))
	}
	for _, d := range boundedtest.Hostile() {
		if len(d) < 1<<16 {
			f.Add(d)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = bounded.CheckYAML("f", b, bounded.Default())
		_ = bounded.CheckJSON("f", b, bounded.Default())
	})
}
