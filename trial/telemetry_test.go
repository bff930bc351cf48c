package trial

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const vllmMetrics = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 12.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.61
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 7.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 5
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.9
vllm:time_to_first_token_seconds_count{model_name="m"} 5
# TYPE vllm_sim:gpu_memory_used_bytes gauge
vllm_sim:gpu_memory_used_bytes{gpu="0"} 7.2e+10
vllm_sim:gpu_memory_used_bytes{gpu="1"} 7.0e+10
# TYPE vllm_sim:gpu_memory_total_bytes gauge
vllm_sim:gpu_memory_total_bytes{gpu="0"} 8.0e+10
vllm_sim:gpu_memory_total_bytes{gpu="1"} 8.0e+10
`

func TestParseEngineMetrics(t *testing.T) {
	m, err := ParseEngineMetrics(strings.NewReader(vllmMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := EngineMetrics{KVCacheUsage: 0.61, Running: 16, Waiting: 3, Preemptions: 7, GPUMemUsed: 1.42e11, GPUMemTotal: 1.6e11, HasGPUMemory: true}
	if m != want {
		t.Errorf("got %+v\nwant %+v", m, want)
	}
	old := "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.3\n# TYPE vllm:num_preemptions counter\nvllm:num_preemptions 2\n"
	m, err = ParseEngineMetrics(strings.NewReader(old))
	if err != nil || m.KVCacheUsage != 0.3 || m.Preemptions != 2 || m.HasGPUMemory {
		t.Errorf("deprecated names: %+v %v", m, err)
	}
	if _, err := ParseEngineMetrics(strings.NewReader("vllm:x{ 1\n")); err == nil {
		t.Error("garbage accepted")
	}
}

func FuzzParseEngineMetrics(f *testing.F) {
	f.Add([]byte(vllmMetrics))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseEngineMetrics(strings.NewReader(string(b))) // must not panic
	})
}

func TestRecorderEngineOnly(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		// preemptions grow from 7 to 7+n; memory peaks at the second scrape
		body := strings.Replace(vllmMetrics, `model_name="m"} 7.0`, `model_name="m"} `+string(rune('7'+min(n, 2))), 1)
		if n == 2 {
			body = strings.Replace(body, `gpu="0"} 7.2e+10`, `gpu="0"} 7.6e+10`, 1)
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	var r recorder
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	r.sample(ctx, nil, 0, srv.Client(), srv.URL, 50*time.Millisecond)
	tel, vram, src, throttled := r.summary()
	if tel.Source != "engine-metrics" || src != "engine-metrics" || throttled || tel.Samples < 3 {
		t.Fatalf("summary = %+v (%s)", tel, src)
	}
	if want := 1.46e11 / gib; vram != want || tel.TotalMemoryGiB != 1.6e11/gib {
		t.Errorf("vram = %v, want %v", vram, want)
	}
	if tel.MaxKVCacheUsage != 0.61 || tel.MaxRunning != 16 || tel.Preemptions != 1 {
		t.Errorf("engine readings = %+v", tel)
	}
	var none recorder
	if tel, _, src, _ := none.summary(); tel.Source != "none" || src != "none" {
		t.Errorf("empty recorder = %+v %s", tel, src)
	}
}

func TestThrottleNames(t *testing.T) {
	if got := strings.Join(ThrottleNames(0x1|0x4|0x40|0x100), ","); got != "sw_power_cap,hw_thermal_slowdown" {
		t.Errorf("names = %q", got)
	}
}
