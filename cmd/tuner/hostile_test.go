package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/bounded/boundedtest"
)

// hostileDoors are the commands that read a YAML file a user names, each
// with the file's place marked by F.
func hostileDoors(db string) map[string][]string {
	search := []string{"--db", db, "search", "--engine", "sim-virtual", "--model", testModel, "--gpu", testGPU, "--trials", "1"}
	with := func(base []string, extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	return map[string][]string{
		"workload":  with(search, "--workload", "F"),
		"space":     with(search, "--space", "F"),
		"profiles":  with(search, "--profiles", "F"),
		"matrix":    {"--db", db, "bench", "run", "--engine", "sim-virtual", "--model", testModel, "--gpu", testGPU, "--matrix", "F"},
		"scenarios": {"eval", "search", "--quick", "--scenarios-file", "F", "--out", filepath.Join(filepath.Dir(db), "eval")},
	}
}

// Issue 29: each hostile document of the issue, given to each command that
// reads a YAML file, exits 2 with the file and the limit named, allocating
// under 64 MB (a 200 KB document took 15 GB before).
func TestHostileFilesRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	for name, doc := range boundedtest.Hostile() {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		for door, args := range hostileDoors(db) {
			t.Run(name+"/"+door, func(t *testing.T) {
				args := append([]string(nil), args...)
				for i, a := range args {
					if a == "F" {
						args[i] = f
					}
				}
				var code int
				var errb string
				n := boundedtest.Allocated(func() { code, _, errb = runTuner(t, args...) })
				if code != exitUsage || !strings.Contains(errb, f) || !strings.Contains(errb, "over the limit of") {
					t.Fatalf("exit %d, stderr %q: want 2 naming %s and the limit", code, errb, f)
				}
				if n > 64<<20 {
					t.Errorf("allocated %d MB to refuse it", n>>20)
				}
			})
		}
	}
}

// A 200 MB benchmark result is refused by its size before it is read (it
// took 906 MB before).
func TestBenchImportRefusesBySize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(200 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var code int
	var errb string
	n := boundedtest.Allocated(func() { code, _, errb = runTuner(t, "--db", filepath.Join(dir, "t.db"), "bench", "import", p) })
	if code != exitUsage || !strings.Contains(errb, p+": size over the limit of 67108864 bytes") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if n > 32<<20 {
		t.Errorf("allocated %d MB to refuse it", n>>20)
	}
}

// BenchmarkRefuseHostileCLI is the time from the command line to exit 2
// for each hostile document given as a workload.
func BenchmarkRefuseHostileCLI(b *testing.B) {
	dir := b.TempDir()
	for name, doc := range boundedtest.Hostile() {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, doc, 0o600); err != nil {
			b.Fatal(err)
		}
		args := hostileDoors(filepath.Join(dir, "t.db"))["workload"]
		args[len(args)-1] = f
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if code, _, _ := runTuner(b, args...); code != exitUsage {
					b.Fatalf("exit %d", code)
				}
			}
		})
	}
}
