package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/benchcpu"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
	"github.com/vllm-tuner/tuner/store/storetest"
)

// BenchmarkServeBigStudy is `tuner serve` over a study of 10,000 trials of
// 10,000 distinct configs (storetest.BigStudy: about 29 KB of record a
// trial, most of it per-level metrics) on each backend, a bbolt file and
// a PostgreSQL server. Per iteration, on a fresh database:
//
//	import-s          ImportStudy of the 10,000 trials
//	import-cpu-s      the CPU time this process spent on it (PostgreSQL's
//	                  own not counted)
//	first-read-s      a fresh server's first GET of the trials page, the
//	                  front and the recommendation, one after another
//	first-read-cpu-s  the CPU time the server spent on them
//	p99-ms            the 99th percentile of 200 further GETs of the three
//	rss-MB            the server process's peak resident memory (VmHWM)
//	                  after them
//
// The server is the real binary in its own process, so its memory is its
// own, not the benchmark's (which holds the trials to import). The CPU
// times barely depend on how busy the machine is; the wall times do.
func BenchmarkServeBigStudy(b *testing.B) {
	const n = 10000
	tunerBin, _ := binaries(b)
	st, trials := storetest.BigStudy(n)
	ctx := context.Background()
	backends := map[string]func(b *testing.B) (store.DB, string){
		"bbolt": func(b *testing.B) (store.DB, string) {
			path := filepath.Join(b.TempDir(), "big.db")
			db, err := boltstore.Open(ctx, path, boltstore.Options{MinFreeBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			return db, path
		},
		"postgres": func(b *testing.B) (store.DB, string) {
			url := pgtest.DB(b)
			db, err := pgstore.Open(ctx, pgstore.Config{URL: url})
			if err != nil {
				b.Fatal(err)
			}
			return db, url
		},
	}
	for _, name := range []string{"bbolt", "postgres"} {
		b.Run(name, func(b *testing.B) {
			var imp, impCPU, first, firstCPU time.Duration
			var lat []time.Duration
			var rss float64
			for b.Loop() {
				db, where := backends[name](b)
				t0, c0 := time.Now(), benchcpu.Process()
				if err := db.ImportStudy(ctx, st, trials); err != nil {
					b.Fatal(err)
				}
				imp, impCPU = imp+time.Since(t0), impCPU+benchcpu.Process()-c0
				db.Close() // the server opens it (a bbolt file has one writer)

				base, cmd := startServe(b, tunerBin, where)
				urls := []string{
					base + "/api/v1/studies/" + st.ID + "/trials?limit=50",
					base + "/api/v1/studies/" + st.ID + "/front",
					base + "/api/v1/studies/" + st.ID + "/recommend",
				}
				pid := cmd.Process.Pid
				t0, c0 = time.Now(), benchcpu.Of(pid)
				for _, u := range urls {
					benchGet(b, u)
				}
				first, firstCPU = first+time.Since(t0), firstCPU+benchcpu.Of(pid)-c0
				for i := range 200 {
					t0 := time.Now()
					benchGet(b, urls[i%len(urls)])
					lat = append(lat, time.Since(t0))
				}
				rss += peakRSSMB(b, pid)
				cmd.Process.Kill()
				cmd.Wait()
			}
			slices.Sort(lat)
			b.ReportMetric(imp.Seconds()/float64(b.N), "import-s")
			b.ReportMetric(impCPU.Seconds()/float64(b.N), "import-cpu-s")
			b.ReportMetric(first.Seconds()/float64(b.N), "first-read-s")
			b.ReportMetric(firstCPU.Seconds()/float64(b.N), "first-read-cpu-s")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(rss/float64(b.N), "rss-MB")
		})
	}
}

// benchGet reads a whole answer, which must be 200 OK.
func benchGet(b *testing.B, url string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v\n%.300s", url, resp.StatusCode, err, body)
	}
}

// peakRSSMB is a process's peak resident memory (VmHWM) in MB.
func peakRSSMB(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1000
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
