package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
)

// TestSearchPostgres: a sim-virtual search against a PostgreSQL database,
// then db check on it, a copy to a bbolt file and db check on the copy:
// the same trials, no password printed anywhere.
func TestSearchPostgres(t *testing.T) {
	url := pgtest.DB(t)
	code, out, errb := runTuner(t, virtualArgs(url, "--trials", "6", "--repeats", "1")...)
	if code != 0 {
		t.Fatalf("search: exit %d\n%s\n%s", code, out, errb)
	}
	for _, want := range []string{"study ", "6 search trials", "recommended: ", "verdict: "} {
		if !strings.Contains(out, want) {
			t.Errorf("search output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errb, pgtest.Password) {
		t.Errorf("the password is printed:\n%s\n%s", out, errb)
	}
	code, out, errb = runTuner(t, "--db", url, "db", "check")
	if code != 0 || !strings.Contains(out, "ok: ") || strings.Contains(out, pgtest.Password) {
		t.Fatalf("db check: exit %d\n%s\n%s", code, out, errb)
	}
	file := filepath.Join(t.TempDir(), "copy.db")
	code, out, errb = runTuner(t, "db", "copy", "--from", url, "--to", file)
	if code != 0 || !strings.Contains(out, "copied 1 studies") || strings.Contains(out, pgtest.Password) {
		t.Fatalf("db copy: exit %d\n%s\n%s", code, out, errb)
	}
	code, out, errb = runTuner(t, "--db", file, "db", "check")
	if code != 0 {
		t.Fatalf("db check of the copy: exit %d\n%s\n%s", code, out, errb)
	}
	ctx := context.Background()
	pg, err := pgstore.Open(ctx, pgstore.Config{URL: url, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	bolt := openTestStore(t, file)
	studies, err := pg.Studies(ctx)
	if err != nil || len(studies) != 1 {
		t.Fatalf("studies: %v %v", studies, err)
	}
	a, err1 := pg.Trials(ctx, studies[0].ID, store.TrialFilter{})
	b, err2 := bolt.Trials(ctx, studies[0].ID, store.TrialFilter{})
	if err1 != nil || err2 != nil || len(a) < 6 || len(a) != len(b) {
		t.Fatalf("trials: PostgreSQL %d (%v), copy %d (%v)", len(a), err1, len(b), err2)
	}
	// The study resumes on PostgreSQL like on a file.
	code, out, errb = runTuner(t, virtualArgs(url, "--trials", "8", "--repeats", "1", "--resume")...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errb)
	}
}

// TestPostgresErrors: a wrong password or an unreachable server exits 1
// naming host and database (never the password) before any trial starts;
// a reading command on an empty database says it has no schema yet
// without printing the URL; db migrate migrates an empty database.
func TestPostgresErrors(t *testing.T) {
	url := pgtest.DB(t)
	wrong := strings.Replace(url, pgtest.Password, "N0tThePassw0rd", 1)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		want   string
		secret string
	}{
		{"wrong password", virtualArgs(wrong), 1, "127.0.0.1:", "N0tThePassw0rd"},
		{"unreachable", virtualArgs("postgres://u:Secr3tX@127.0.0.1:1/tunerdb?connect_timeout=5"), 1, "127.0.0.1:1/tunerdb", "Secr3tX"},
		{"reading before any search", []string{"--db", url, "trials"}, 1, "needs migration", pgtest.Password},
		{"migrate", []string{"--db", url, "db", "migrate"}, 0, fmt.Sprintf("schema %d", pgstore.SchemaVersion()), pgtest.Password},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := runTuner(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errb, tc.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s\n%s", code, tc.code, tc.want, out, errb)
			}
			if strings.Contains(out+errb, tc.secret) {
				t.Errorf("the password is printed:\n%s\n%s", out, errb)
			}
			if strings.Contains(errb, "trial #") {
				t.Errorf("a trial ran:\n%s", errb)
			}
		})
	}
}

// TestServePostgres: `tuner serve --db postgres://...` runs a queued
// sim-virtual job on PostgreSQL and serves its trials.
func TestServePostgres(t *testing.T) {
	url := pgtest.DB(t)
	tunerBin, _ := binaries(t)
	base, _ := startServe(t, tunerBin, url)
	body := fmt.Sprintf(`{"model":%q,"gpu":%q,"engine":"sim-virtual","trials":3,"requests":40,"finalists":0}`, testModel, testGPU)
	job := postServeJob(t, base, body)
	var j store.Job
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) { // a hang guard
		getJSON(t, base+"/api/v1/jobs/"+job.ID, &j)
		if j.State.Finished() || time.Now().After(deadline) {
			break
		}
	}
	if j.State != store.JobDone {
		t.Fatalf("job: %+v", j)
	}
	var page trialPage
	getJSON(t, base+"/api/v1/studies/"+j.Study+"/trials", &page)
	if page.Total != 3 {
		t.Fatalf("%d trials served, want 3", page.Total)
	}
	pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: url, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if ts, err := pg.Trials(context.Background(), j.Study, store.TrialFilter{}); err != nil || len(ts) != 3 {
		t.Fatalf("trials in PostgreSQL: %d, %v", len(ts), err)
	}
}
