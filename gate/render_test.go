package gate

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenReport compares two synthetic runs: one cell unchanged, one 27%
// slower, one imported as a summary only, one cell in base only.
func goldenReport(t *testing.T) *Report {
	t.Helper()
	r := rand.New(rand.NewPCG(2026, 12))
	base := Run{ID: "run-41", Model: "Qwen/Qwen2-72B-Instruct", Matrix: "seed", Cells: []Cell{
		synthCell(r, "short-128x64-c64", 120, 1),
		synthCell(r, "long-8192x512-c4", 60, 1),
		{Name: "mix-60-30-10", Summary: map[string]float64{"tpot_p50": 18.1, "ttft_p99": 402.5}},
		synthCell(r, "sharegpt-c16", 30, 1),
	}}
	mix := synthCell(r, "mix-60-30-10", 80, 1.02)
	next := Run{ID: "run-42", Model: "Qwen/Qwen2-72B-Instruct", Matrix: "seed", Cells: []Cell{
		synthCell(r, "short-128x64-c64", 120, 1),
		synthCell(r, "long-8192x512-c4", 60, 1.27),
		mix,
	}}
	rep, err := Compare(base, next, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestRenderGolden(t *testing.T) {
	rep := goldenReport(t)
	if rep.Regressions == 0 || rep.Untestable == 0 || rep.Inconclusive == 0 || len(rep.Skipped) != 1 {
		t.Fatalf("fixture lost its point: %d regressions, %d untestable, %d inconclusive, %d skipped", rep.Regressions, rep.Untestable, rep.Inconclusive, len(rep.Skipped))
	}
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer, *Report) error
	}{
		{"compare.txt", func(b *bytes.Buffer, r *Report) error { return WriteText(b, r) }},
		{"compare.json", func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) }},
		{"compare.md", func(b *bytes.Buffer, r *Report) error { return WriteMarkdown(b, r) }},
		{"compare.xml", func(b *bytes.Buffer, r *Report) error { return WriteJUnit(b, r) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b, rep); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./gate -run TestRenderGolden -update)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs from the golden file (go test ./gate -run TestRenderGolden -update to accept):\n%s", tc.file, b.String())
			}
		})
	}
}

// The JUnit file parses back with one test case per cell x metric, a
// failure per regression and a skip per untestable row; the JSON with null
// for missing numbers.
func TestRenderParsesBack(t *testing.T) {
	rep := goldenReport(t)
	var b bytes.Buffer
	if err := WriteJUnit(&b, rep); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	fails, skips := 0, 0
	for _, c := range doc.Suites[0].Cases {
		if c.Failure != nil {
			fails++
		}
		if c.Skipped != nil {
			skips++
		}
	}
	if len(doc.Suites[0].Cases) != len(rep.Rows) || fails != rep.Regressions || skips != rep.Untestable+rep.Inconclusive || doc.Failures != rep.Regressions {
		t.Errorf("junit: %d cases, %d failures, %d skipped; report %d rows, %d regressions, %d untestable",
			len(doc.Suites[0].Cases), fails, skips, len(rep.Rows), rep.Regressions, rep.Untestable)
	}
	b.Reset()
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Regressions int
		Rows        []map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	nulls := 0
	for _, r := range back.Rows {
		if r["p"] == nil {
			nulls++
		}
	}
	if back.Regressions != rep.Regressions || len(back.Rows) != len(rep.Rows) || nulls != rep.Untestable {
		t.Errorf("json: %d regressions, %d rows, %d null p", back.Regressions, len(back.Rows), nulls)
	}
}
