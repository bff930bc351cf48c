package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/trial"
)

// dbWithTrials writes a small database for the db command tests.
func dbWithTrials(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path, s := newTestDB(t)
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

// TestCorruptFilesFailLoudly flips bytes of a real database (written by a
// sim-virtual search) at seeded offsets, three at a time: at page headers
// (where a flipped element count once made `trials` print "no trials"), in
// the meta pages and anywhere in the used pages. Every reading command must
// either print exactly what it prints for the intact file, or exit 1 with
// an error naming the file; and when `db check` passes, every reader must
// print the intact file's output (no changed values behind a clean check).
func TestCorruptFilesFailLoudly(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	// 100 requests a trial: the same 12 trials and 256 pages as the
	// workload's own count, at 60% of the CPU under -race.
	if code, _, errs := runTuner(t, "--db", good, "search", "-m", "Llama-3.1-8B", "-g", "H100-80GB", "--engine", "sim-virtual",
		"--trials", "12", "--requests", "100", "--no-surrogate", "--seed", "3"); code != 0 {
		t.Fatalf("search: exit %d\n%s", code, errs)
	}
	readers := [][]string{
		{"trials", "--json"},
		{"trials"},
		{"studies"},
		{"recommend", "-m", "Llama-3.1-8B"},
		{"pareto", "-m", "Llama-3.1-8B"},
	}
	want := make([]string, len(readers))
	for i, r := range readers {
		code, out, errs := runTuner(t, append([]string{"--db", good}, r...)...)
		if code != 0 {
			t.Fatalf("%v on the intact file: exit %d\n%s", r, code, errs)
		}
		want[i] = out
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := len(raw) / page
	rng := rand.New(rand.NewPCG(13, 4))
	type damage struct {
		kind string
		offs []int
	}
	var cases []damage
	for i := range 48 {
		var d damage
		switch i % 4 {
		case 0, 1: // a page header: id, flags, count, overflow
			at := (2+rng.IntN(pages-2))*page + 8 + rng.IntN(6)
			d = damage{"page header", []int{at, at + 1, at + 2}}
		case 2: // a meta page
			at := rng.IntN(2)*page + 16 + rng.IntN(61)
			d = damage{"meta page", []int{at, at + 1, at + 2}}
		default:
			d = damage{"anywhere", []int{rng.IntN(len(raw)), rng.IntN(len(raw)), rng.IntN(len(raw))}}
		}
		cases = append(cases, d)
	}
	detected := 0
	for i, d := range cases {
		bad := bytes.Clone(raw)
		for _, o := range d.offs {
			bad[o] ^= 0xff
		}
		p := filepath.Join(t.TempDir(), "bad.db")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		checkCode, checkOut, checkErr := runTuner(t, "--db", p, "db", "check")
		if checkCode != 0 {
			detected++
			if checkCode != 1 || !strings.Contains(checkErr, p) {
				t.Errorf("case %d (%s at %v): db check exit %d, want 1 naming %s\n%s%s", i, d.kind, d.offs, checkCode, p, checkOut, checkErr)
			}
		}
		for j, r := range readers {
			code, out, errs := runTuner(t, append([]string{"--db", p}, r...)...)
			switch {
			case code == 0 && out == want[j]:
			case code == 0:
				t.Errorf("case %d (%s at %v): %v exits 0 with output that differs from the intact file's (db check exit %d)\n%s", i, d.kind, d.offs, r, checkCode, out)
			case code != 1 || !strings.Contains(errs, p):
				t.Errorf("case %d (%s at %v): %v exit %d, want 1 with an error naming %s\n%s", i, d.kind, d.offs, r, code, p, errs)
			case checkCode == 0:
				t.Errorf("case %d (%s at %v): %v fails but db check passes\n%s", i, d.kind, d.offs, r, errs)
			}
		}
		after, _ := os.ReadFile(p)
		if !bytes.Equal(after, bad) {
			t.Errorf("case %d: a reading command modified the damaged file", i)
		}
	}
	t.Logf("%d of %d damaged files detected by db check; the rest read exactly as the intact file", detected, len(cases))
}

// TestReadersLeaveNoFiles: reading commands, search --dry-run among them
// ("start nothing"), create nothing beside an existing database (the gate
// file <db>.lock was left behind).
func TestReadersLeaveNoFiles(t *testing.T) {
	db := dbWithTrials(t)
	dir := filepath.Dir(db)
	if err := os.Remove(db + ".lock"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(db + ".sessions"); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	before := names()
	for _, args := range [][]string{
		{"trials"}, {"studies"}, {"db", "check"},
		{"search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual", "--dry-run", "--proposals", "1"},
	} {
		if code, _, errs := runTuner(t, append([]string{"--db", db}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errs)
		}
		if after := names(); !slices.Equal(after, before) {
			t.Fatalf("%v left files: %v, before %v", args, after, before)
		}
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
	studies, _ := openTestStore(t, good).Studies(context.Background())
	logPath := filepath.Join(filepath.Dir(good), "logs", studies[0].ID, "trial.log")
	rec := trial.EngineRecord{PGID: w.Process.Pid, Marker: "m1", Owner: dead.Process.Pid, OwnerStart: 1, Host: host, Log: logPath}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(runDir, fmt.Sprintf(".engine-%d.json", rec.PGID)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runTuner(t, "--db", good, "db", "check")
	want := fmt.Sprintf("engine: group %d alive (pids [%d], log %s); its tuner (pid %d) is gone", rec.PGID, rec.PGID, logPath, rec.Owner)
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("db check: exit %d\n%s%s\nwant %q", code, out, errs, want)
	}
	// The same engine logging elsewhere belongs to another database (the
	// run directory is every tuner's of the user): not listed.
	rec.Log = "/x/trial.log"
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(runDir, fmt.Sprintf(".engine-%d.json", rec.PGID)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runTuner(t, "--db", good, "db", "check"); code != 0 || strings.Contains(out, "engine: group") {
		t.Errorf("db check lists another database's engine: exit %d\n%s", code, out)
	}
	rec.Log = logPath
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(runDir, fmt.Sprintf(".engine-%d.json", rec.PGID)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runTuner(t, "--db", good, "db", "check", "--json")
	if code != 0 || !strings.Contains(out, `"engines"`) || !strings.Contains(out, `"trials": 5`) {
		t.Errorf("db check --json: exit %d\n%s", code, out)
	}
}

// TestDBCheckListsDuplicates: a config measured twice by the search (two
// searches on one study at once) is listed by db check, which still exits 0
// (the file is sound).
func TestDBCheckListsDuplicates(t *testing.T) {
	path := dbWithTrials(t)
	ctx := context.Background()
	s, err := boltstore.Open(ctx, path, boltstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	studies, _ := s.Studies(ctx)
	ts, err := s.Trials(ctx, studies[0].ID, store.TrialFilter{})
	if err != nil || len(ts) == 0 {
		t.Fatalf("trials: %v", err)
	}
	dup, err := s.BeginTrial(ctx, ts[0].StudyID, ts[0].Config, store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishTrial(ctx, dup.ID, ts[0].Result); err != nil {
		t.Fatal(err)
	}
	s.Close()
	runCLICases(t, []cliCase{
		{"text", []string{"--db", path, "db", "check"}, 0, []string{"duplicate: study " + ts[0].StudyID, ts[0].ID + " and " + dup.ID, "1 duplicate measurements"}, nil},
		{"json", []string{"--db", path, "db", "check", "--json"}, 0, []string{`"duplicates": [`}, nil},
	})
}
