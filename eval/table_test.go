package eval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTruthCheck(t *testing.T) {
	rep := &Report{Scenarios: []ScenarioReport{{Name: "a", JoinedHV: 1 + TruthSlack/2}, {Name: "b", JoinedHV: 1.02, FromRuns: 3}}}
	err := TruthCheck(rep)
	var tb *TruthBeatenError
	if !errors.Is(err, ErrTruthBeaten) || !errors.As(err, &tb) {
		t.Fatalf("TruthCheck = %v, want a *TruthBeatenError", err)
	}
	if len(tb.Scenarios) != 1 || tb.Scenarios[0] != "b" || tb.Configs[0] != 3 || !strings.Contains(err.Error(), "b: x1.0200 (3 configs)") {
		t.Errorf("error %+v: %v", tb, err)
	}
	// The configs that beat it are named, three at most (the report has all).
	run := func(seed uint64) RunConfig {
		return RunConfig{Strategy: "tuner-warm", Seed: seed, Trial: 23, ConfigID: "0123abcd", Vec: []float64{3105.4, 37.04, 791.2}}
	}
	rep.Scenarios[1].BeyondTruth = []RunConfig{run(6), run(7), run(8), run(9)}
	msg := TruthCheck(rep).Error()
	for _, want := range []string{"b: x1.0200 (3 configs; tuner-warm seed 6 trial 23, config 0123abcd (3105, 37.04, 791.2);", "seed 8 trial 23", "; 1 more)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "seed 9") {
		t.Errorf("error %q lists more than three configs", msg)
	}
	rep.Scenarios = rep.Scenarios[:1]
	if err := TruthCheck(rep); err != nil {
		t.Errorf("within the slack: %v", err)
	}
}

func TestReplaceTable(t *testing.T) {
	f := filepath.Join(t.TempDir(), "README.md")
	const other = "<!-- heldout-table:begin (make eval-search-heldout) -->\nold held-out\n<!-- heldout-table:end -->\n"
	os.WriteFile(f, []byte("intro\n"+TableBegin+"\nold table\n"+TableEnd+"\n"+other+"rest\n"), 0o644)
	if err := ReplaceTable(f, SearchTableName, "| new |\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if want := "intro\n" + TableBegin + "\n| new |\n" + TableEnd + "\n" + other + "rest\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	// Another block by its name; the begin marker's command stays.
	if err := ReplaceTable(f, "heldout-table", "| held |\n"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(f)
	if want := "intro\n" + TableBegin + "\n| new |\n" + TableEnd + "\n<!-- heldout-table:begin (make eval-search-heldout) -->\n| held |\n<!-- heldout-table:end -->\nrest\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	for _, tc := range []struct{ doc, name string }{
		{"no markers\n", SearchTableName},
		{"intro\n" + TableBegin + "\nx\n" + TableEnd + "\n", "heldout-table"},
		{TableEnd + "\n" + TableBegin + "\n", SearchTableName},
		{"<!-- search-table:begin --><!-- search-table:end -->\n", SearchTableName},
	} {
		os.WriteFile(f, []byte(tc.doc), 0o644)
		if err := ReplaceTable(f, tc.name, "x"); err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%q, block %s: err %v, want one naming the file", tc.doc, tc.name, err)
		}
	}
}

// TestSearchTableGoals: the README block counts, per goal, the scenarios
// that meet it, with each scenario's headline figure.
func TestSearchTableGoals(t *testing.T) {
	r := &Report{
		Settings:  Settings{Seeds: 10, Trials: 24, Checkpoints: []int{8, 24}, Strategies: []string{StratTuner}},
		Scenarios: []ScenarioReport{{Name: "a"}, {Name: "b"}},
		Goals: []Goal{
			{Goal: "g1", Scenario: "a", Value: "0.910", Met: true},
			{Goal: "g2", Scenario: "a", Value: "tuner 12 vs random >24; to 0.80: x", Met: false},
			{Goal: "g1", Scenario: "b", Value: "0.614", Met: false},
		},
	}
	got := r.SearchTable()
	for _, want := range []string{
		"| g1 | 1 of 2 | a 0.910 (yes), b 0.614 (no) |\n",
		"| g2 | 0 of 1 | a tuner 12 vs random >24 (no) |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
