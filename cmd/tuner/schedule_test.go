package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/vllm-tuner/tuner/service"
	"github.com/vllm-tuner/tuner/store/boltstore"
)

// TestScheduleCommands: tuner schedule add, list, pause, resume and rm
// against a service's API, its refusals as usage errors (exit 2) with the
// server's message.
func TestScheduleCommands(t *testing.T) {
	st, err := boltstore.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), boltstore.Options{NoSync: true, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := service.New(service.Config{DB: st, Token: "tk"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	t.Setenv("TUNER_TOKEN", "tk")
	job := `{"kind":"bench","tier":"smoke","engine":"sim-virtual","model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB","config":"default"}`
	s := []string{"--server", ts.URL}
	runCLICases(t, []cliCase{
		{"add", append([]string{"schedule", "add", "--name", "nightly", "--cron", "@nightly", job}, s...), 0, []string{"schedule sched-1 (nightly) added: next run "}, nil},
		{"bad cron", append([]string{"schedule", "add", "--name", "x", "--cron", "0 2 * *", job}, s...), 2, nil,
			[]string{`schedule body: cron "0 2 * *": expected exactly 5 fields, found 4`}},
		{"name in use", append([]string{"schedule", "add", "--name", "nightly", "--cron", "@daily", job}, s...), 2, nil, []string{`schedule name "nightly"`, "already exists"}},
		{"not JSON", append([]string{"schedule", "add", "--name", "y", "--cron", "@daily", "{"}, s...), 2, nil, []string{"JOB: not JSON"}},
		{"list", append([]string{"schedule", "list"}, s...), 0, []string{"ID", "sched-1  nightly  @nightly  smoke bench of meta-llama/Llama-3.1-8B-Instruct"}, nil},
		{"pause", append([]string{"schedule", "pause", "sched-1"}, s...), 0, []string{"schedule sched-1: pause"}, nil},
		{"list paused", append([]string{"schedule", "list", "--json"}, s...), 0, []string{`"paused": true`}, nil},
		{"resume", append([]string{"schedule", "resume", "sched-1"}, s...), 0, []string{"schedule sched-1: resume"}, nil},
		{"rm", append([]string{"schedule", "rm", "sched-1"}, s...), 0, []string{"schedule sched-1: rm"}, nil},
		{"rm again", append([]string{"schedule", "rm", "sched-1"}, s...), 2, nil, []string{"sched-1", "not found"}},
		{"no ID", append([]string{"schedule", "pause"}, s...), 2, nil, []string{"takes one schedule ID"}},
	})
	t.Setenv("TUNER_TOKEN", "wrong")
	runCLICases(t, []cliCase{{"wrong token", append([]string{"schedule", "list"}, s...), 1, nil, []string{"401 Unauthorized", "missing or wrong bearer token"}}})
}
