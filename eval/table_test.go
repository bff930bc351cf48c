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
	rep.Scenarios = rep.Scenarios[:1]
	if err := TruthCheck(rep); err != nil {
		t.Errorf("within the slack: %v", err)
	}
}

func TestReplaceTable(t *testing.T) {
	f := filepath.Join(t.TempDir(), "README.md")
	os.WriteFile(f, []byte("intro\n"+TableBegin+"\nold table\n"+TableEnd+"\nrest\n"), 0o644)
	if err := ReplaceTable(f, "| new |\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if want := "intro\n" + TableBegin + "\n| new |\n" + TableEnd + "\nrest\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	os.WriteFile(f, []byte("no markers\n"), 0o644)
	if err := ReplaceTable(f, "x"); err == nil {
		t.Error("a file without markers was accepted")
	}
}
