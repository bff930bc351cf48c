package trial

import (
	"slices"
	"testing"
	"time"
)

func TestWorkloadShortened(t *testing.T) {
	base := Workload{Name: "w", NumRequests: 300, Warmup: 20, Seed: 7, Levels: []float64{8, 16},
		Prompt: LengthDist{Kind: "uniform", Min: 10, Max: 900}, Output: LengthDist{Kind: "uniform", Min: 5, Max: 300}}
	for _, tc := range []struct {
		name    string
		w       Workload
		f       float64
		req     int
		dur     time.Duration
		wantErr bool
	}{
		{name: "quarter", w: base, f: 0.25, req: 75},
		{name: "rounds up", w: base, f: 0.001, req: 1},
		{name: "whole", w: base, f: 1, req: 300},
		{name: "duration", w: Workload{Name: "d", Duration: time.Minute, Warmup: 4}, f: 0.5, dur: 30 * time.Second},
		{name: "duration floor", w: Workload{Name: "d", Duration: time.Minute}, f: 0.001, dur: time.Second},
		{name: "zero", w: base, f: 0, wantErr: true},
		{name: "above one", w: base, f: 1.5, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.w.Shortened(tc.f)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("fraction %v accepted", tc.f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.NumRequests != tc.req || got.Duration != tc.dur || got.Warmup != tc.w.Warmup || !slices.Equal(got.Levels, tc.w.Levels) {
				t.Fatalf("shortened %+v, want %d requests, %s, warm-up and levels kept", got, tc.req, tc.dur)
			}
		})
	}
	// The short run's requests are the first ones of the full run.
	short, _ := base.Shortened(0.25)
	full, part := base.Requests(), short.Requests()
	if len(part) != 95 || !slices.Equal(part, full[:95]) {
		t.Fatalf("short run's %d requests are not the full run's first 95", len(part))
	}
}

func TestSLORelaxed(t *testing.T) {
	slo, err := ParseSLO("tpot_p99<=50ms,output_throughput>=1000")
	if err != nil {
		t.Fatal(err)
	}
	r := slo.Relaxed(0.1)
	if r[0].Limit != 55 || r[1].Limit != 900 || slo[0].Limit != 50 {
		t.Fatalf("relaxed %v (from %v), want tpot_p99<=55ms, output_throughput>=900, the original unchanged", r, slo)
	}
}
