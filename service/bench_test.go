package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
)

// benchStudy fills a study with n trials: a real sim-virtual search of 40
// trials, whose configs and results are then re-measured (copied) until
// the study holds n trials, as a long study of repeated runs would.
func benchStudy(b *testing.B, n int) (*Server, string) {
	b.Helper()
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), store.Options{NoSync: true, MinFreeBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	srv, err := New(Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	spec, err := ParseJob(strings.NewReader(simJob(40)))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	j, err := st.AddJob(context.Background(), store.Job{Kind: "search", Spec: raw, State: store.JobQueued})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	for {
		if j, _ = st.Job(ctx, j.ID); j.State.Finished() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if j.State != store.JobDone {
		b.Fatalf("setup job %s: %s", j.State, j.Error)
	}
	seed, err := st.Trials(context.Background(), j.Study, store.TrialFilter{})
	if err != nil {
		b.Fatal(err)
	}
	for i := len(seed); i < n; i++ {
		src := seed[i%len(seed)]
		t, err := st.BeginTrial(context.Background(), j.Study, src.Config, store.BeginOptions{Repeat: 10 + i})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.FinishTrial(context.Background(), t.ID, src.Result); err != nil {
			b.Fatal(err)
		}
	}
	return srv, j.Study
}

// BenchmarkEndpoints10k measures the front and trials endpoints over a real
// listener on a study of 10,000 trials and reports the p99 latency.
func BenchmarkEndpoints10k(b *testing.B) {
	srv, study := benchStudy(b, 10000)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, ep := range []string{"front", "trials", "recommend"} {
		b.Run(ep, func(b *testing.B) {
			url := ts.URL + "/api/v1/studies/" + study + "/" + ep
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				var v any
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%s: %d %v", ep, resp.StatusCode, err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
