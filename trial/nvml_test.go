//go:build cgo && linux && !nonvml

package trial

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// mockH200 is the go-nvml DGX H200 mock with the readings the mock leaves
// unset filled in: device i uses (10+i) GiB, draws 300 W, has used 1000 J
// plus 50 J per Sample call (8 devices: 400 J a call), and device 3 reports a thermal slowdown.
func mockH200(t *testing.T, pids func(dev int) []int) *server.Server {
	t.Helper()
	s := dgxh200.New()
	calls := 0
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		total := dev.Config.MemoryMB << 20
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			used := uint64(10+i) << 30
			return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 80, Memory: 40}, nvml.SUCCESS
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 300_000, nvml.SUCCESS }
		dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
			if i == 0 {
				calls++
			}
			return uint64(1_000_000 + 50_000*calls), nvml.SUCCESS
		}
		dev.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) { return uint32(1980 - 10*i), nvml.SUCCESS }
		dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(60 + i), nvml.SUCCESS }
		dev.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
			if i == 3 {
				return nvml.ClocksEventReasonSwThermalSlowdown | nvml.ClocksEventReasonGpuIdle, nvml.SUCCESS
			}
			return 0, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			var out []nvml.ProcessInfo
			if pids == nil {
				return nil, nvml.SUCCESS
			}
			for _, p := range pids(i) {
				out = append(out, nvml.ProcessInfo{Pid: uint32(p), UsedGpuMemory: 1 << 30})
			}
			return out, nvml.SUCCESS
		}
	}
	return s
}

func TestNVMLSamplerWithMock(t *testing.T) {
	src, err := openNVML(mockH200(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	id, err := src.Identity()
	if err != nil {
		t.Fatal(err)
	}
	if id.Count != 8 || !strings.Contains(id.Name, "H200") || len(id.UUIDs) != 8 || id.Driver != "550.54.15" || id.MemoryGiB < 130 {
		t.Errorf("identity = %+v", id)
	}
	var r recorder
	for range 3 {
		s, err := src.Sample()
		if err != nil {
			t.Fatal(err)
		}
		r.addGPU(s)
	}
	tel, vram, vsrc, throttled := r.summary()
	// Used memory: sum over devices of (10+i) GiB = 80 + 28 = 108 GiB.
	if vsrc != "nvml" || tel.Source != "nvml" || tel.Samples != 3 || vram != 108 {
		t.Errorf("summary = %+v vram %v (%s)", tel, vram, vsrc)
	}
	if tel.MeanUtilPct != 80 || tel.MeanPowerW != 2400 || tel.EnergyJ != 800 || tel.MaxTempC != 67 || tel.MinSMClockMHz != 1910 {
		t.Errorf("readings = %+v", tel)
	}
	if !throttled || strings.Join(tel.ThrottleReasons, ",") != "sw_thermal_slowdown" {
		t.Errorf("throttle = %v %v", throttled, tel.ThrottleReasons)
	}
}

func TestNVMLProcessesAndRelease(t *testing.T) {
	var released atomic.Bool
	pids := func(dev int) []int {
		switch {
		case dev == 0:
			return []int{4242}
		case dev == 5 && !released.Load():
			return []int{4243, 99}
		}
		return nil
	}
	src, err := openNVML(mockH200(t, pids))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ps, err := src.Processes()
	if err != nil || len(ps) != 3 {
		t.Fatalf("Processes = %v, %v", ps, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := WaitGPUReleased(ctx, src, []int{4243, 7}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "4243") {
		t.Errorf("WaitGPUReleased = %v, want held by 4243", err)
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		released.Store(true) // the previous engine exits
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := WaitGPUReleased(ctx2, src, []int{4243}); err != nil {
		t.Errorf("WaitGPUReleased after release: %v", err)
	}
}

func TestOpenNVMLWithoutDriver(t *testing.T) {
	// This machine has no NVIDIA driver: OpenNVML must say so cleanly. On
	// a GPU machine it must work.
	src, err := OpenNVML()
	if err != nil {
		if !errors.Is(err, ErrNVMLUnavailable) {
			t.Fatalf("err = %v, want ErrNVMLUnavailable", err)
		}
		return
	}
	defer src.Close()
	if _, err := src.Sample(); err != nil {
		t.Fatalf("Sample on a real GPU: %v", err)
	}
}
