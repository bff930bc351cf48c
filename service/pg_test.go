package service

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
)

// TestMain stops the throwaway PostgreSQL cluster a test started.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestServiceOnPostgres: the service on a PostgreSQL database queues a
// sim-virtual job through the API, runs it and serves its trials, front
// and recommendation; the job persists in the database.
func TestServiceOnPostgres(t *testing.T) {
	url := pgtest.DB(t)
	ctx := context.Background()
	pg, err := pgstore.Open(ctx, pgstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	srv, err := New(Config{DB: pg, DataDir: t.TempDir(), Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	e := &env{srv: srv, ts: ts}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(rctx) }()
	defer func() {
		ts.CloseClientConnections()
		ts.Close()
		stop()
		<-done
	}()
	evctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := e.events(t, evctx)
	j := postJob(t, e, simJob(4))
	waitState(t, ch, j.ID, store.JobDone)

	stored, err := pg.Job(ctx, j.ID)
	if err != nil || stored.State != store.JobDone || stored.Study == "" || stored.Runs != 1 {
		t.Fatalf("job in PostgreSQL: %+v, %v", stored, err)
	}
	var page trialPage
	getJSON(t, e, "/api/v1/studies/"+stored.Study+"/trials", &page)
	if page.Total != len(page.Trials) {
		t.Fatalf("%d trials served of %d", len(page.Trials), page.Total)
	}
	wantSearchAndRounds(t, page.Trials, 4, 2)
	rows, err := pg.Trials(ctx, stored.Study, store.TrialFilter{})
	if err != nil || len(rows) != page.Total {
		t.Fatalf("trials in PostgreSQL: %d (served %d), %v", len(rows), page.Total, err)
	}
	var front frontDoc
	getJSON(t, e, "/api/v1/studies/"+stored.Study+"/front", &front)
	if len(front.Front) == 0 {
		t.Fatalf("empty front")
	}
	code, out := e.do(t, "GET", "/api/v1/studies/"+stored.Study+"/recommend?format=command", "", "")
	if code != http.StatusOK || !strings.HasPrefix(out, "vllm serve "+testModel+" ") {
		t.Fatalf("recommend: %d %q", code, out)
	}
	// Benchmark runs are kept in PostgreSQL too: none yet, a missing one 404.
	if code, out := e.do(t, "GET", "/api/v1/runs", "", ""); code != http.StatusOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("runs on PostgreSQL: %d %q", code, out)
	}
	if code, out := e.do(t, "GET", "/api/v1/runs/r1", "", ""); code != http.StatusNotFound {
		t.Errorf("missing run on PostgreSQL: %d %q", code, out)
	}
	var jobs []store.Job
	getJSON(t, e, "/api/v1/jobs", &jobs)
	if len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("jobs: %+v", jobs)
	}
	var studies []store.Study
	getJSON(t, e, "/api/v1/studies?model="+testModel, &studies)
	if len(studies) != 1 || studies[0].ID != stored.Study {
		t.Fatalf("studies: %+v", studies)
	}
	code, out = e.do(t, "GET", "/metrics", "", "")
	if code != http.StatusOK || !strings.Contains(out, fmt.Sprintf(`tuner_store_write_seconds_count{op="finish"} %d`, page.Total)) {
		t.Fatalf("metrics:\n%s", out)
	}
}
