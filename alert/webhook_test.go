package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/vllm-tuner/tuner/gate"
)

// receiver is a loopback webhook that answers the scripted statuses in
// turn (then 200) and keeps the bodies it got.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	bodies   [][]byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, b)
	status := http.StatusOK
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	}
	if r.Header.Get("Content-Type") != "application/json" {
		status = http.StatusUnsupportedMediaType
	}
	w.WriteHeader(status)
}

// fakeClock records the waits instead of sleeping.
type fakeClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return ctx.Err()
}

var t0 = time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)

func testEvent() Event {
	return Event{Kind: KindRegression, Severity: "critical", Summary: "regression: r7 vs r5: chat tpot_p99 +12.0%",
		Labels: map[string]string{"model": "tiny-llama", "tier": "nightly", "bad label": "x"}, Time: t0, Source: "tuner bench compare"}
}

func TestSendRetriesAndRecords(t *testing.T) {
	rc := &receiver{statuses: []int{503, 502, 429}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var log bytes.Buffer
	clk := &fakeClock{}
	s, err := NewSender(Config{URL: srv.URL, MaxAttempts: 5, Backoff: time.Second, MaxBackoff: 3 * time.Second, Log: &log},
		WithClock(clk.sleep, func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Send(context.Background(), testEvent())
	if err != nil || !d.OK || d.Attempts != 4 || d.Status != 200 {
		t.Fatalf("delivery %+v, %v", d, err)
	}
	// Exponential backoff, capped.
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(clk.waits, want) {
		t.Errorf("waits %v, want %v", clk.waits, want)
	}
	// Alertmanager's alert array.
	var alerts []model.Alert
	if err := json.Unmarshal(rc.bodies[3], &alerts); err != nil || len(alerts) != 1 {
		t.Fatalf("payload %s: %v", rc.bodies[3], err)
	}
	a := alerts[0]
	if a.Labels["alertname"] != "TunerRegression" || a.Labels["severity"] != "critical" || a.Labels["model"] != "tiny-llama" ||
		a.Annotations["summary"] == "" || !a.StartsAt.Equal(t0) || a.Validate() != nil {
		t.Errorf("alert %+v (validate: %v)", a, a.Validate())
	}
	if _, ok := a.Labels["bad label"]; ok {
		t.Error("an invalid label name was sent")
	}
	var rec Delivery
	if err := json.Unmarshal(log.Bytes(), &rec); err != nil || !rec.OK || rec.Attempts != 4 || rec.Kind != KindRegression {
		t.Fatalf("record %s: %v", log.String(), err)
	}
}

func TestSendGivesUp(t *testing.T) {
	tests := []struct {
		name     string
		statuses []int
		attempts int
	}{
		{"server keeps failing", []int{500, 500, 500, 500}, 3},
		{"refused: not retried", []int{400}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{statuses: tt.statuses}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			var log bytes.Buffer
			clk := &fakeClock{}
			s, _ := NewSender(Config{URL: srv.URL, Format: FormatJSON, MaxAttempts: 3, Log: &log}, WithClock(clk.sleep, time.Now))
			d, err := s.Send(context.Background(), testEvent())
			if !errors.Is(err, ErrNotDelivered) || d.OK || d.Attempts != tt.attempts || len(rc.bodies) != tt.attempts {
				t.Fatalf("delivery %+v, %v, %d posts", d, err, len(rc.bodies))
			}
			var ev Event
			if err := json.Unmarshal(rc.bodies[0], &ev); err != nil || ev.Kind != KindRegression || ev.Labels["model"] != "tiny-llama" {
				t.Errorf("generic payload %s: %v", rc.bodies[0], err)
			}
			if !strings.Contains(log.String(), `"ok":false`) {
				t.Errorf("record %s", log.String())
			}
		})
	}
	// Nobody listening: transport errors are retried, then given up.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s, _ := NewSender(Config{URL: url, MaxAttempts: 2}, WithClock((&fakeClock{}).sleep, time.Now))
	if d, err := s.Send(context.Background(), testEvent()); !errors.Is(err, ErrNotDelivered) || d.Attempts != 2 {
		t.Fatalf("closed port: %+v %v", d, err)
	}
}

func TestGateMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewGateMetrics(reg)
	m.Observe(&gate.Report{Model: "a", Regressions: 2}, t0)
	m.Observe(&gate.Report{Model: "b", Inconclusive: 1}, t0)
	m.Observe(&gate.Report{Model: "a"}, t0.Add(time.Hour))
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range mt.GetLabel() {
				key += "," + lp.GetName() + "=" + lp.GetValue()
			}
			got[key] = mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"tuner_gate_verdict,model=a,verdict=pass": 1, "tuner_gate_verdict,model=a,verdict=regression": 0,
		"tuner_gate_verdict,model=b,verdict=inconclusive": 1, "tuner_gate_regressed_rows,model=a": 0,
		"tuner_gate_last_run_timestamp_seconds,model=a": float64(t0.Add(time.Hour).Unix()),
		"tuner_gate_runs_total,verdict=regression":      1, "tuner_gate_runs_total,verdict=pass": 1, "tuner_gate_runs_total,verdict=inconclusive": 1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
