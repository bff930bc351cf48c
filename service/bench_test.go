package service

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
)

// benchStudy serves a study of n trials: a real sim-virtual search of 40
// trials, whose records are then repeated (as re-measurements) until the
// study holds n, imported in one transaction into a fresh database.
func benchStudy(b *testing.B, n int) (*Server, string) {
	b.Helper()
	ctx := context.Background()
	opts := boltstore.Options{NoSync: true, MinFreeBytes: -1}
	seedDB, err := boltstore.Open(ctx, filepath.Join(b.TempDir(), "seed.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer seedDB.Close()
	srv, err := New(Config{DB: seedDB})
	if err != nil {
		b.Fatal(err)
	}
	spec, err := ParseJob(strings.NewReader(simJob(40)))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	j, err := seedDB.AddJob(ctx, store.Job{Kind: "search", Spec: raw, State: store.JobQueued})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(rctx) }()
	for {
		if j, _ = seedDB.Job(ctx, j.ID); j.State.Finished() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if j.State != store.JobDone {
		b.Fatalf("setup job %s: %s", j.State, j.Error)
	}
	st, err := seedDB.Study(ctx, j.Study)
	if err != nil {
		b.Fatal(err)
	}
	seed, err := seedDB.Trials(ctx, j.Study, store.TrialFilter{})
	if err != nil {
		b.Fatal(err)
	}
	trials := make([]store.Trial, n)
	for i := range trials {
		t := seed[i%len(seed)]
		if i >= len(seed) {
			t.Repeat = 10 + i
		}
		t.Seq = uint64(i + 1)
		t.ID = store.TrialID(st.ID, t.Seq)
		trials[i] = t
	}
	big, err := boltstore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { big.Close() })
	if err := big.ImportStudy(ctx, st, trials); err != nil {
		b.Fatal(err)
	}
	if srv, err = New(Config{DB: big}); err != nil {
		b.Fatal(err)
	}
	return srv, st.ID
}

// BenchmarkEndpoints10k measures the front, trials and recommend
// endpoints over a real listener on a study of 10,000 trials and reports
// each one's p99 latency once the study is cached, and that of the front
// and the trials right after a new trial was written (after-trial: the
// cache rereads the study's tail and judges it again). A fresh server's
// first read, which decodes every trial's summary, is cmd/tuner's
// BenchmarkServeBigStudy (first-read-s, through a real `tuner serve` on
// both backends).
func BenchmarkEndpoints10k(b *testing.B) {
	srv, study := benchStudy(b, 10000)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	base := ts.URL + "/api/v1/studies/" + study + "/"
	get := func(b *testing.B, url string) time.Duration {
		t0 := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		var v any
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
		}
		return time.Since(t0)
	}
	p99 := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	get(b, base+"front") // the first read (a fresh server's: cmd/tuner's BenchmarkServeBigStudy)
	for _, ep := range []string{"front", "trials", "trials?sort=throughput&order=desc", "recommend"} {
		b.Run(strings.ReplaceAll(ep, "?", "/"), func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, get(b, base+ep))
			}
			p99(b, lat)
		})
	}
	ctx := context.Background()
	seed, err := srv.db.Trial(ctx, store.TrialID(study, 2))
	if err != nil {
		b.Fatal(err)
	}
	for _, ep := range []string{"front", "trials"} {
		b.Run(ep+"-after-trial", func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				t, err := srv.db.BeginTrial(ctx, study, seed.Config, store.BeginOptions{Repeat: 99})
				if err == nil {
					_, err = srv.db.FinishTrial(ctx, t.ID, seed.Result)
				}
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, get(b, base+ep))
			}
			p99(b, lat)
		})
	}
}

// BenchmarkSSEClients measures a sim-virtual job's trial throughput while
// 0 or 100 clients follow /api/v1/events over a real listener: the event
// fan-out must not slow the job's trials.
func BenchmarkSSEClients(b *testing.B) {
	const trials = 30
	for _, clients := range []int{0, 100} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			st, err := boltstore.Open(context.Background(), filepath.Join(b.TempDir(), "sse.db"), boltstore.Options{NoSync: true, MinFreeBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			srv, err := New(Config{DB: st})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); srv.Run(ctx) }()
			defer func() { cancel(); <-done }()
			var events atomic.Int64
			var wg sync.WaitGroup
			for range clients {
				req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/v1/events", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					for sc.Scan() {
						if strings.HasPrefix(sc.Text(), "data: ") {
							events.Add(1)
						}
					}
				}()
			}
			c, _ := srv.hub.subscribe()
			defer srv.hub.unsubscribe(c)
			var elapsed time.Duration
			n := 0
			for b.Loop() {
				// A new study each run (another, never binding SLO bound),
				// all its trials measured.
				spec, err := ParseJob(strings.NewReader(fmt.Sprintf(`{"model":%q,"gpu":%q,"engine":"sim-virtual","trials":%d,"requests":40,"finalists":0,"slo":"ttft_p99<=%dms"}`, testModel, testGPU, trials, 1000000+n)))
				if err != nil {
					b.Fatal(err)
				}
				raw, _ := json.Marshal(spec)
				t0 := time.Now()
				j, err := st.AddJob(ctx, store.Job{Kind: "search", Spec: raw, State: store.JobQueued})
				if err != nil {
					b.Fatal(err)
				}
				srv.poke()
				for ev := range c {
					if ev.Job == j.ID && ev.State.Finished() {
						if ev.State != store.JobDone {
							b.Fatalf("job %s: %s", ev.State, ev.Error)
						}
						break
					}
				}
				elapsed += time.Since(t0)
				n++
			}
			b.ReportMetric(float64(n*trials)/elapsed.Seconds(), "trials/s")
			b.ReportMetric(float64(events.Load())/float64(max(clients, 1))/float64(n), "events/client/job")
			cancel()
			ts.CloseClientConnections()
			wg.Wait()
		})
	}
}
