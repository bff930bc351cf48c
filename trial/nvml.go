//go:build cgo && linux && !nonvml

package trial

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// OpenNVML initialises NVML (dlopen of libnvidia-ml at run time). It
// returns ErrNVMLUnavailable when the library or a GPU is missing.
func OpenNVML() (GPUSource, error) { return openNVML(nvml.New()) }

// nvmlSource reads GPUs through an nvml.Interface (the real library or the
// go-nvml mock in tests).
type nvmlSource struct {
	lib  nvml.Interface
	devs []nvml.Device
}

var _ GPUSource = (*nvmlSource)(nil)

func openNVML(lib nvml.Interface) (src GPUSource, err error) {
	defer func() {
		// go-nvml panics when a symbol is missing from an old driver.
		if p := recover(); p != nil {
			src, err = nil, fmt.Errorf("%w: %v", ErrNVMLUnavailable, p)
		}
	}()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: init: %s", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS || n == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: no GPU (%s)", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	s := &nvmlSource{lib: lib}
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("%w: device %d: %s", ErrNVMLUnavailable, i, nvml.ErrorString(ret))
		}
		s.devs = append(s.devs, d)
	}
	return s, nil
}

func (s *nvmlSource) Identity() (GPUIdentity, error) {
	id := GPUIdentity{Count: len(s.devs)}
	if v, ret := s.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		id.Driver = v
	}
	for i, d := range s.devs {
		if name, ret := d.GetName(); ret == nvml.SUCCESS && i == 0 {
			id.Name = name
		}
		if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
			id.UUIDs = append(id.UUIDs, u)
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS && i == 0 {
			id.MemoryGiB = float64(m.Total) / gib
		}
	}
	return id, nil
}

// Sample reads every device; a reading a device does not support stays 0.
func (s *nvmlSource) Sample() ([]DeviceSample, error) {
	out := make([]DeviceSample, 0, len(s.devs))
	for i, d := range s.devs {
		ds := DeviceSample{Index: i}
		m, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: memory of device %d: %s", i, nvml.ErrorString(ret))
		}
		ds.MemUsed, ds.MemTotal = m.Used, m.Total
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			ds.UtilPct = float64(u.Gpu)
		}
		if p, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			ds.PowerW = float64(p) / 1000
		}
		if e, ret := d.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
			ds.EnergyJ = float64(e) / 1000
		}
		if c, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			ds.SMClockMHz = float64(c)
		}
		if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			ds.TempC = float64(t)
		}
		if r, ret := d.GetCurrentClocksThrottleReasons(); ret == nvml.SUCCESS {
			ds.Throttle = r
		}
		out = append(out, ds)
	}
	return out, nil
}

func (s *nvmlSource) Processes() ([]int, error) {
	var pids []int
	for i, d := range s.devs {
		ps, ret := d.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: processes of device %d: %s", i, nvml.ErrorString(ret))
		}
		for _, p := range ps {
			pids = append(pids, int(p.Pid))
		}
	}
	return pids, nil
}

func (s *nvmlSource) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}
