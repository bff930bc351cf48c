package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/tuner"
)

// A regression the CLI gate finds reaches a loopback webhook as an
// Alertmanager alert, the delivery is recorded, and the verdict is written
// as Prometheus metrics; a usage error raises nothing.
func TestBenchCompareAlerts(t *testing.T) {
	db := compareFixture(t)
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // retried
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	logPath, metricsPath := filepath.Join(dir, "alerts.jsonl"), filepath.Join(dir, "gate.prom")
	code, _, errb := runTuner(t, "--db", db, "--alert-webhook", srv.URL, "--alert-log", logPath,
		"bench", "compare", "--metrics-file", metricsPath, "r1", "r3")
	if code != 1 || !strings.Contains(errb, "alert regression sent to") {
		t.Fatalf("exit %d: %s", code, errb)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d posts, want 2 (one retry)", len(bodies))
	}
	var alerts []model.Alert
	if err := json.Unmarshal(bodies[1], &alerts); err != nil || len(alerts) != 1 {
		t.Fatalf("%s: %v", bodies[1], err)
	}
	a := alerts[0]
	if a.Labels["alertname"] != "TunerRegression" || a.Labels["model"] != "tiny-llama" || a.Labels["new_run"] != "r3" ||
		!strings.Contains(string(a.Annotations["summary"]), "regression: r3 vs r1") {
		t.Errorf("alert %+v", a)
	}
	b, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(b), `"ok":true`) || !strings.Contains(string(b), `"attempts":2`) {
		t.Errorf("delivery record %s: %v", b, err)
	}
	m, err := os.ReadFile(metricsPath)
	if err != nil || !strings.Contains(string(m), `tuner_gate_verdict{model="tiny-llama",verdict="regression"} 1`) {
		t.Errorf("metrics file %s: %v", m, err)
	}
	code, _, _ = runTuner(t, "--db", db, "--alert-webhook", srv.URL, "bench", "compare", "r1")
	if code != 2 || len(bodies) != 2 {
		t.Errorf("a usage error: exit %d, %d posts", code, len(bodies))
	}
}

func TestAlertOf(t *testing.T) {
	rep := &gate.Report{Model: "m", Base: "r1", New: "r2", Regressions: 1}
	tests := []struct {
		err     error
		command string
		kind    alert.Kind // "" = no alert
	}{
		{regressionError{rep}, "bench compare", alert.KindRegression},
		{fmt.Errorf("search: %w", tuner.ErrEngineBroken), "search", alert.KindEngineBroken},
		{errors.New("run r3 stored: failed"), "bench run", alert.KindRunFailed},
		{errors.New("store write: disk full"), "worker", alert.KindRunFailed},
		{inconclusiveError{rep}, "bench compare", ""},
		{usagef("bad flag"), "search", ""},
		{errors.New("no such run"), "bench show", ""},
	}
	for _, tt := range tests {
		ev, ok := alertOf(tt.err, tt.command)
		if (tt.kind == "") == ok || ok && ev.Kind != tt.kind {
			t.Errorf("%v (%s): %v %q, want %q", tt.err, tt.command, ok, ev.Kind, tt.kind)
		}
	}
}
