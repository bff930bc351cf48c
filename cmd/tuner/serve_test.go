package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
)

func TestServeRefusesUnsafeOptions(t *testing.T) {
	t.Setenv("TUNER_TOKEN", "")
	db := filepath.Join(t.TempDir(), "serve.db")
	runCLICases(t, []cliCase{
		{"non-loopback without token", []string{"--db", db, "serve", "--listen", "0.0.0.0:0"}, 2, nil, []string{"--listen 0.0.0.0:0 is not loopback: set --token or TUNER_TOKEN"}},
		{"all interfaces without token", []string{"--db", db, "serve", "--listen", ":0"}, 2, nil, []string{"is not loopback"}},
		{"public read without token", []string{"--db", db, "serve", "--public-read"}, 2, nil, []string{"--public-read needs --token"}},
		{"bad gpu sets", []string{"--db", db, "serve", "--gpu-sets", "0,1;x"}, 2, nil, []string{`"x" is not a device index`}},
		{"empty gpu set", []string{"--db", db, "serve", "--gpu-sets", "0;;1"}, 2, nil, []string{"empty set"}},
		{"bad address", []string{"--db", db, "serve", "--listen", "localhost"}, 2, nil, []string{"--listen \"localhost\""}},
	})
}

// startServe starts `tuner serve` on a free loopback port and returns its
// base URL and process.
func startServe(t testing.TB, bin, db string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(bin, "--db", db, "serve", "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no address: %v", err)
	}
	m := regexp.MustCompile(`http://(\S+)/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve: %q", line)
	}
	go io.Copy(io.Discard, out)
	return "http://" + m[1], cmd
}

// postServeJob queues a job on a running `tuner serve`.
func postServeJob(t *testing.T, base, body string) store.Job {
	t.Helper()
	resp, err := http.Post(base+"/api/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var job store.Job
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&job) != nil {
		t.Fatalf("POST job: %d", resp.StatusCode)
	}
	return job
}

// trialPage is a page of the service's trials table, its rows read as
// trial records (the fields they share).
type trialPage struct {
	Total  int           `json:"total"`
	Trials []store.Trial `json:"trials"`
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestE2EServeKilledResumes: `tuner serve` killed with SIGKILL during a
// job with real vllm-sim engines, then started again on the same
// database, resumes the job: the search ends with every trial it asked
// for, none run twice, and no engine is left behind.
func TestE2EServeKilledResumes(t *testing.T) {
	tunerBin, simBin := binaries(t)
	db := filepath.Join(t.TempDir(), "serve.db")
	base, cmd := startServe(t, tunerBin, db)
	body := fmt.Sprintf(`{"model":%q,"gpu":%q,"engine":"sim","workload":"short-high-concurrency","requests":48,"slo":%q,"trials":4,"budget":"0s","trial_timeout":"60s","engine_args":["--startup-scale=0.01"],"seed":3,"finalists":1,"repeats":1}`,
		e2eModel, testGPU, e2eSLO)
	job := postServeJob(t, base, body)
	// Kill once a trial has finished and the next one is running.
	deadline := time.Now().Add(2 * time.Minute) // a hang guard, not a speed assertion
	for {
		var j store.Job
		getJSON(t, base+"/api/v1/jobs/"+job.ID, &j)
		if j.Study != "" {
			var page trialPage
			getJSON(t, base+"/api/v1/studies/"+j.Study+"/trials", &page)
			trials := page.Trials
			if len(trials) >= 2 && trials[len(trials)-1].State == store.StateRunning {
				break
			}
		}
		if j.State.Finished() || time.Now().After(deadline) {
			t.Fatalf("job %s never had a running second trial (state %s)", job.ID, j.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	base, cmd = startServe(t, tunerBin, db)
	var j store.Job
	for deadline = time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		getJSON(t, base+"/api/v1/jobs/"+job.ID, &j)
		if j.State.Finished() || time.Now().After(deadline) {
			break
		}
	}
	if j.State != store.JobDone || j.Runs != 2 {
		t.Fatalf("job after restart: %+v; want done after 2 runs", j)
	}
	var page trialPage
	getJSON(t, base+"/api/v1/studies/"+j.Study+"/trials?limit=1000", &page)
	trials := page.Trials
	searched := map[string]int{}
	finished, interrupted := 0, 0
	for _, tr := range trials {
		switch {
		case tr.Repeat > 0:
		case tr.State == store.StateInterrupted:
			interrupted++
		case tr.State == store.StateRunning:
			t.Fatalf("trial %s still running after the job ended", tr.ID)
		default:
			finished++
			searched[tr.ConfigID]++
		}
	}
	if finished != 4 || interrupted != 1 {
		t.Fatalf("%d finished and %d interrupted search trials; want 4 and the 1 killed", finished, interrupted)
	}
	for id, n := range searched {
		if n > 1 {
			t.Fatalf("config %s searched %d times", id, n)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
			t.Fatalf("serve after SIGTERM: %v; want exit %d", err, exitInterrupted)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop on SIGTERM")
	}
	noSimProcesses(t, simBin)
}
