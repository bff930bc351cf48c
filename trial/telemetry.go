package trial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// GPUSource reads the GPUs of the machine. NVML is the implementation
// (OpenNVML); without cgo, a driver or a GPU it reports ErrNVMLUnavailable
// and the trial falls back to the engine's own metrics.
type GPUSource interface {
	Identity() (GPUIdentity, error)
	Sample() ([]DeviceSample, error)
	// Processes lists the pids holding memory on any GPU.
	Processes() ([]int, error)
	Close() error
}

// DeviceSample is one reading of one GPU.
type DeviceSample struct {
	Index      int
	MemUsed    uint64 // bytes
	MemTotal   uint64 // bytes
	UtilPct    float64
	PowerW     float64
	EnergyJ    float64 // total since driver load
	SMClockMHz float64
	TempC      float64
	Throttle   uint64 // NVML clocks-event reasons bitmask
}

// ErrNVMLUnavailable says NVML cannot be used here (no cgo build, no
// driver library, no GPU).
var ErrNVMLUnavailable = errors.New("nvml unavailable")

// Throttle reason bits (NVML clocks event reasons).
const (
	throttleGpuIdle        = 0x1
	throttleAppClocks      = 0x2
	throttleSwPowerCap     = 0x4
	throttleHwSlowdown     = 0x8
	throttleSyncBoost      = 0x10
	throttleSwThermal      = 0x20
	throttleHwThermal      = 0x40
	throttleHwPowerBrake   = 0x80
	throttleDisplayClock   = 0x100
	throttleMakesUnstable  = throttleHwSlowdown | throttleSwThermal | throttleHwThermal | throttleHwPowerBrake
	throttleNotWorthSaying = throttleGpuIdle | throttleAppClocks | throttleSyncBoost | throttleDisplayClock
)

// ThrottleNames names the reasons set in mask (idle, application clocks,
// sync boost and display clocks are not throttling and are left out).
func ThrottleNames(mask uint64) []string {
	names := []struct {
		bit  uint64
		name string
	}{
		{throttleSwPowerCap, "sw_power_cap"}, {throttleHwSlowdown, "hw_slowdown"},
		{throttleSwThermal, "sw_thermal_slowdown"}, {throttleHwThermal, "hw_thermal_slowdown"},
		{throttleHwPowerBrake, "hw_power_brake_slowdown"},
	}
	var out []string
	for _, n := range names {
		if mask&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// EngineMetrics is one scrape of the engine's /metrics.
type EngineMetrics struct {
	KVCacheUsage float64 // fraction 0-1
	Running      float64
	Waiting      float64
	Preemptions  float64 // counter
	// GPU memory gauges of the simulator (vllm_sim:gpu_memory_*_bytes,
	// summed over the gpu label); HasGPUMemory when present.
	GPUMemUsed   float64
	GPUMemTotal  float64
	HasGPUMemory bool
}

// ParseEngineMetrics reads the Prometheus text exposition of vLLM (both the
// current and the deprecated names) and of vllm-sim.
func ParseEngineMetrics(r io.Reader) (EngineMetrics, error) {
	fams, err := parseFamilies(r)
	if err != nil {
		return EngineMetrics{}, err
	}
	maxOf := func(names ...string) float64 {
		for _, n := range names {
			if mf, ok := fams[n]; ok {
				var v float64
				for _, m := range mf.GetMetric() {
					v = math.Max(v, m.GetGauge().GetValue()+m.GetUntyped().GetValue())
				}
				return v
			}
		}
		return 0
	}
	var em EngineMetrics
	em.KVCacheUsage = maxOf("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
	em.Running, _ = familySum(fams, "vllm:num_requests_running")
	em.Waiting, _ = familySum(fams, "vllm:num_requests_waiting")
	em.Preemptions, _ = familySum(fams, "vllm:num_preemptions_total", "vllm:num_preemptions")
	used, ok1 := familySum(fams, "vllm_sim:gpu_memory_used_bytes")
	total, ok2 := familySum(fams, "vllm_sim:gpu_memory_total_bytes")
	if ok1 && ok2 {
		em.GPUMemUsed, em.GPUMemTotal, em.HasGPUMemory = used, total, true
	}
	return em, nil
}

// familySum is the sum over its series of the first family of names that
// fams holds (a metric's current name, then its deprecated ones), and
// whether there was one.
func familySum(fams map[string]*dto.MetricFamily, names ...string) (float64, bool) {
	for _, n := range names {
		mf, ok := fams[n]
		if !ok {
			continue
		}
		var s float64
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				s += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				s += m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				s += m.GetUntyped().GetValue()
			}
		}
		return s, true
	}
	return 0, false
}

// parseFamilies parses a Prometheus text exposition.
func parseFamilies(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return fams, nil
}

// getMetrics GETs base+"/metrics"; the caller closes the body.
func getMetrics(ctx context.Context, hc *http.Client, base string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return resp.Body, nil
}

// ScrapeEngine fetches and parses base+"/metrics".
func ScrapeEngine(ctx context.Context, hc *http.Client, base string) (EngineMetrics, error) {
	body, err := getMetrics(ctx, hc, base)
	if err != nil {
		return EngineMetrics{}, err
	}
	defer body.Close()
	return ParseEngineMetrics(io.LimitReader(body, 16<<20))
}

// recorder aggregates GPU samples and engine scrapes into a Telemetry.
type recorder struct {
	mu          sync.Mutex
	gpuSamples  int
	engSamples  int
	peakUsed    float64 // bytes, all GPUs
	total       float64
	utilSum     float64
	powerSum    float64
	energy0     float64
	energy1     float64
	maxTemp     float64
	minClock    float64
	throttle    uint64
	engPeakUsed float64
	engTotal    float64
	maxKV       float64
	maxRunning  float64
	maxWaiting  float64
	preempt0    float64
	preempt1    float64
}

func (r *recorder) addGPU(s []DeviceSample) {
	if len(s) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var used, total, util, power, energy float64
	for _, d := range s {
		used += float64(d.MemUsed)
		total += float64(d.MemTotal)
		util += d.UtilPct
		power += d.PowerW
		energy += d.EnergyJ
		r.maxTemp = math.Max(r.maxTemp, d.TempC)
		if d.SMClockMHz > 0 && (r.minClock == 0 || d.SMClockMHz < r.minClock) {
			r.minClock = d.SMClockMHz
		}
		r.throttle |= d.Throttle &^ throttleNotWorthSaying
	}
	if r.gpuSamples == 0 {
		r.energy0 = energy
	}
	r.energy1 = energy
	r.gpuSamples++
	r.peakUsed = math.Max(r.peakUsed, used)
	r.total = total
	r.utilSum += util / float64(len(s))
	r.powerSum += power
}

func (r *recorder) addEngine(m EngineMetrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.engSamples == 0 {
		r.preempt0 = m.Preemptions
	}
	r.engSamples++
	r.preempt1 = m.Preemptions
	r.maxKV = math.Max(r.maxKV, m.KVCacheUsage)
	r.maxRunning = math.Max(r.maxRunning, m.Running)
	r.maxWaiting = math.Max(r.maxWaiting, m.Waiting)
	if m.HasGPUMemory {
		r.engPeakUsed = math.Max(r.engPeakUsed, m.GPUMemUsed)
		r.engTotal = m.GPUMemTotal
	}
}

const gib = 1 << 30

// summary returns the telemetry, the peak VRAM (GiB) and its source, and
// whether a clock or thermal throttle was seen.
func (r *recorder) summary() (Telemetry, float64, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := Telemetry{Source: "none", MaxKVCacheUsage: r.maxKV, MaxRunning: r.maxRunning, MaxWaiting: r.maxWaiting,
		Preemptions: math.Max(0, r.preempt1-r.preempt0)}
	var vram float64
	src := "none"
	switch {
	case r.gpuSamples > 0:
		t.Source, src = "nvml", "nvml"
		t.Samples = r.gpuSamples
		t.PeakMemoryGiB = r.peakUsed / gib
		t.TotalMemoryGiB = r.total / gib
		t.MeanUtilPct = r.utilSum / float64(r.gpuSamples)
		t.MeanPowerW = r.powerSum / float64(r.gpuSamples)
		t.EnergyJ = r.energy1 - r.energy0
		t.MaxTempC = r.maxTemp
		t.MinSMClockMHz = r.minClock
		t.ThrottleReasons = ThrottleNames(r.throttle)
		vram = t.PeakMemoryGiB
	case r.engSamples > 0:
		t.Source = "engine-metrics"
		t.Samples = r.engSamples
		if r.engPeakUsed > 0 {
			src = "engine-metrics"
			t.PeakMemoryGiB = r.engPeakUsed / gib
			t.TotalMemoryGiB = r.engTotal / gib
			vram = t.PeakMemoryGiB
		}
	}
	return t, vram, src, r.throttle&throttleMakesUnstable != 0
}

// sample runs the GPU sampler (every gpuEvery) and the engine scraper
// (every engEvery) until ctx ends. Errors of single readings are skipped;
// a source that keeps failing just yields fewer samples.
func (r *recorder) sample(ctx context.Context, gpu GPUSource, gpuEvery time.Duration, hc *http.Client, base string, engEvery time.Duration) {
	var wg sync.WaitGroup
	if gpu != nil && gpuEvery > 0 {
		wg.Go(func() {
			tick := time.NewTicker(gpuEvery)
			defer tick.Stop()
			for {
				if s, err := gpu.Sample(); err == nil {
					r.addGPU(s)
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	if base != "" && engEvery > 0 {
		wg.Go(func() {
			tick := time.NewTicker(engEvery)
			defer tick.Stop()
			for {
				sctx, cancel := context.WithTimeout(ctx, engEvery+time.Second)
				if m, err := ScrapeEngine(sctx, hc, base); err == nil {
					r.addEngine(m)
				}
				cancel()
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
}

// WaitGPUReleased polls src until none of pids holds GPU memory, or ctx
// ends. Without a source it returns at once.
func WaitGPUReleased(ctx context.Context, src GPUSource, pids []int) error {
	if src == nil || len(pids) == 0 {
		return nil
	}
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		holders, err := src.Processes()
		if err != nil {
			return nil // cannot tell: do not block the next trial
		}
		var left []int
		for _, p := range holders {
			if want[p] {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Ints(left)
			return fmt.Errorf("gpu memory still held by %s: %w", strings.Trim(fmt.Sprint(left), "[]"), ctx.Err())
		case <-tick.C:
		}
	}
}
