package trial

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/benchcpu"
)

// startStampServer runs testdata/stampserver in its own process and returns
// its base URL.
func startStampServer(b *testing.B, args ...string) string {
	b.Helper()
	bin := bins.Path(b, "stampserver", "./testdata/stampserver")
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if err != nil || !ok {
		b.Fatalf("stampserver: %q, %v", line, err)
	}
	return "http://" + addr
}

// BenchmarkStreamLag measures how late the client stamps each chunk at
// 2,000 streams: stampserver (another process) stamps every event with
// CLOCK_MONOTONIC once it is flushed to the socket, and the client's stamp
// of the same chunk minus the server's is the lag (delivery, scheduling and
// the client's own work). 2,000 requests of 50 chunks 20 ms apart (100k
// events/s) in a closed loop at 2,000, each iteration on a fresh client, so
// the first chunks meet the start of the load as a trial's do. Run with -cpu 2; first-* is the first chunk of each request, lag-*
// every other chunk; streams=100 shows the floor of the harness.
// cpu-us/event is the client process's CPU time (user+sys) over the load,
// connection warm-up excluded (warm-cpu-ms: its CPU per iteration).
func BenchmarkStreamLag(b *testing.B) {
	base := startStampServer(b, "-gap", "20ms")
	for _, n := range []int{100, 2000} {
		b.Run("streams="+strconv.Itoa(n), func(b *testing.B) { benchLag(b, base, n) })
	}
}

func benchLag(b *testing.B, base string, streams int) {
	const tokens = 50
	var first, rest []float64
	var cpu, warm time.Duration
	for b.Loop() {
		c := NewClient(base, "m", time.Minute)
		w0 := cpuTime()
		c.Warm(context.Background(), streams) // as Drive does in closed loop
		r0 := cpuTime()
		warm += r0 - w0
		m0 := benchcpu.Mono()
		start := time.Now()
		m1 := benchcpu.Mono()
		origin := (m0 + m1) / 2 // start on the server's clock, within (m1-m0)/2
		recs := c.drive(context.Background(), start, specsN(streams, 16, tokens), Load{Concurrency: streams}, nil)
		c.Close()
		cpu += cpuTime() - r0
		stamps := fetchStamps(b, base)
		for _, r := range recs {
			if !r.OK() {
				b.Fatalf("request %d failed: %s", r.Index, r.Err)
			}
			srv := stamps["tuner-"+strconv.Itoa(r.Index)]
			if len(srv) != len(r.Chunks) {
				b.Fatalf("request %d: %d chunks, server stamped %d", r.Index, len(r.Chunks), len(srv))
			}
			for k, at := range r.Chunks {
				lag := float64(origin+int64(r.Start+at)-srv[k]) / 1e3
				if k == 0 {
					first = append(first, lag)
				} else {
					rest = append(rest, lag)
				}
			}
		}
	}
	slices.Sort(first)
	slices.Sort(rest)
	b.ReportMetric(float64(cpu)/1e3/float64(len(first)+len(rest)), "cpu-us/event")
	b.ReportMetric(float64(warm)/1e6/float64(b.N), "warm-cpu-ms")
	b.ReportMetric(Percentile(first, 50), "first-p50-us")
	b.ReportMetric(Percentile(first, 99), "first-p99-us")
	b.ReportMetric(first[len(first)-1], "first-max-us")
	b.ReportMetric(Percentile(rest, 50), "lag-p50-us")
	b.ReportMetric(Percentile(rest, 99), "lag-p99-us")
	b.ReportMetric(Percentile(rest, 99.9), "lag-p99.9-us")
}

func fetchStamps(b *testing.B, base string) map[string][]int64 {
	b.Helper()
	resp, err := http.Get(base + "/stamps")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var s map[string][]int64
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		b.Fatal(err)
	}
	return s
}
