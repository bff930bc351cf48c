package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// dbWithTrials writes a small database for the db command tests.
func dbWithTrials(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tuner.db")
	s, err := store.Open(ctx, path, store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.EnsureStudy(ctx, store.StudyKey{Model: "m", GPU: "H100-80GB", Engine: "sim", Workload: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		cfg := spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(16 << i)})
		tr, err := s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res := &trial.Result{Config: cfg, Status: trial.StatusOK, PeakVRAMGiB: 70,
			Levels: []trial.Level{{Metrics: trial.Metrics{OutputThroughput: float64(100 * (i + 1)), TPOT: trial.Dist{P99: float64(10 + 5*i)}}}}}
		if _, err := s.FinishTrial(ctx, tr.ID, res); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestDBCommands(t *testing.T) {
	good := dbWithTrials(t)
	corrupt := filepath.Join(t.TempDir(), "bad.db")
	raw, _ := os.ReadFile(good)
	if err := os.WriteFile(corrupt, raw[:len(raw)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "copy.db")
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"check ok", []string{"--db", good, "db", "check"}, 0, "ok: "},
		{"check json", []string{"--db", good, "db", "check", "--json"}, 0, `"trials": 5`},
		{"check corrupt", []string{"--db", corrupt, "db", "check"}, 1, corrupt},
		{"check empty", []string{"--db", empty, "db", "check"}, 1, empty},
		{"check missing", []string{"--db", filepath.Join(t.TempDir(), "none.db"), "db", "check"}, 1, "no database file at"},
		{"check extra arg", []string{"--db", good, "db", "check", "x"}, 2, "no arguments"},
		{"backup no path", []string{"--db", good, "db", "backup"}, 2, "PATH"},
		{"backup", []string{"--db", good, "db", "backup", backup}, 0, "backed up"},
		{"check backup", []string{"--db", backup, "db", "check"}, 0, "5 trials"},
		{"export csv", []string{"--db", good, "db", "export"}, 0, "param.max_num_seqs"},
		{"export jsonl", []string{"--db", good, "db", "export", "--format", "jsonl"}, 0, `"state":"ok"`},
		{"export bad format", []string{"--db", good, "db", "export", "--format", "xml"}, 2, "csv or jsonl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runTuner(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.contains) {
				t.Errorf("exit %d (want %d), output %q / %q lacks %q", code, tc.code, out, errOut, tc.contains)
			}
		})
	}
	after, _ := os.ReadFile(corrupt)
	if !bytes.Equal(after, raw[:len(raw)/3]) {
		t.Error("db check modified the corrupt file")
	}
}

// TestDBCheckListsEngines: db check lists an engine group whose tuner died
// (its record in the per-user run dir) and says how it ends.
func TestDBCheckListsEngines(t *testing.T) {
	good := dbWithTrials(t)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	runDir := trial.DefaultRunDir()
	if runDir == "" {
		t.Fatal("no run dir")
	}
	// An orphaned engine worker: its own group, the marker in its env.
	w := exec.Command("sleep", "60")
	w.Env = append(os.Environ(), "TUNER_ENGINE_ID=m1")
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { w.Process.Kill(); w.Wait() }()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	rec := trial.EngineRecord{PGID: w.Process.Pid, Marker: "m1", Owner: dead.Process.Pid, OwnerStart: 1, Host: host, Log: "/x/trial.log"}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(runDir, fmt.Sprintf(".engine-%d.json", rec.PGID)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runTuner(t, "--db", good, "db", "check")
	want := fmt.Sprintf("engine: group %d alive (pids [%d], log /x/trial.log); its tuner (pid %d) is gone", rec.PGID, rec.PGID, rec.Owner)
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("db check: exit %d\n%s%s\nwant %q", code, out, errs, want)
	}
	code, out, _ = runTuner(t, "--db", good, "db", "check", "--json")
	if code != 0 || !strings.Contains(out, `"engines"`) || !strings.Contains(out, `"trials": 5`) {
		t.Errorf("db check --json: exit %d\n%s", code, out)
	}
}
