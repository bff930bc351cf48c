package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
)

// TestReviewFromURL: every review command prints byte for byte the same
// from a postgres:// URL as from the bbolt file the database was copied
// from (`db copy`, benchmark runs included): a team that moved its studies
// to PostgreSQL reviews them as it did on one machine.
func TestReviewFromURL(t *testing.T) {
	src := virtualFixture(t)
	file := filepath.Join(t.TempDir(), "review.db")
	if code, _, errb := runTuner(t, "db", "copy", "--from", src, "--to", file); code != 0 {
		t.Fatalf("copy the fixture: exit %d\n%s", code, errb)
	}
	for _, args := range [][]string{
		{"bench", "import", "--label", "git=abc", "testdata/vllm-bench-detailed.json"},
		{"bench", "import", "--label", "git=def", "testdata/vllm-bench-detailed.json"},
	} {
		if code, _, errb := runTuner(t, append([]string{"--db", file}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errb)
		}
	}
	url := pgtest.DB(t)
	code, out, errb := runTuner(t, "db", "copy", "--from", file, "--to", url)
	if code != 0 || !strings.Contains(out, "2 benchmark runs") {
		t.Fatalf("db copy to PostgreSQL: exit %d\n%s%s", code, out, errb)
	}
	if strings.Contains(out, pgtest.Password) {
		t.Errorf("db copy prints the password: %s", out)
	}
	code, out, errb = runTuner(t, "--db", file, "trials", "--json")
	if code != 0 {
		t.Fatalf("trials: exit %d\n%s", code, errb)
	}
	var trials []struct {
		ID    string `json:"id"`
		Study string `json:"study_id"`
	}
	if err := json.Unmarshal([]byte(out), &trials); err != nil || len(trials) < 2 {
		t.Fatalf("trials --json: %v\n%.500s", err, out)
	}
	a, b := trials[0].ID, trials[1].ID
	for _, args := range [][]string{
		{"pareto", "--model", testModel},
		{"pareto", "--model", testModel, "--json"},
		{"recommend", "--model", testModel, "--format", "yaml"},
		{"recommend", "--model", testModel, "--format", "command"},
		{"recommend", "--model", testModel, "--format", "json"},
		{"trials", "--json"},
		{"trials", "--study", trials[0].Study},
		{"show", a},
		{"show", "--json", b},
		{"studies"},
		{"compare", a, b},
		{"compare", "--json", a, b},
		{"bench", "list"},
		{"bench", "show", "r1"},
		{"bench", "show", "--json", "latest"},
		{"bench", "export", "r2"},
		{"bench", "compare", "r1", "r2"},
		{"db", "export", "--format", "csv"},
		{"db", "export", "--format", "jsonl"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			fc, fout, ferr := runTuner(t, append([]string{"--db", file}, args...)...)
			uc, uout, uerr := runTuner(t, append([]string{"--db", url}, args...)...)
			if fc != 0 && fc != exitInconclusive { // bench compare of two imports: too noisy to tell
				t.Fatalf("from the file: exit %d\n%s", fc, ferr)
			}
			if uc != fc || uout != fout {
				t.Fatalf("from the URL: exit %d (file %d)\n--- file:\n%.2000s\n--- URL:\n%.2000s\n%s", uc, fc, fout, uout, uerr)
			}
			if strings.Contains(uout+uerr, pgtest.Password) {
				t.Errorf("the password is printed")
			}
		})
	}
}
