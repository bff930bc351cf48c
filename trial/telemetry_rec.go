package trial

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// TelemetryRecording samples GPU and engine telemetry in the background, as
// a trial does during its load, for callers that drive load themselves
// (benchmark runs).
type TelemetryRecording struct {
	rec    recorder
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// RecordTelemetry starts sampling gpu every gpuEvery (nil: no GPU) and
// scraping base's /metrics every engEvery ("" or hc nil: no scrape) until
// Stop.
func RecordTelemetry(ctx context.Context, gpu GPUSource, gpuEvery time.Duration, hc *http.Client, base string, engEvery time.Duration) *TelemetryRecording {
	t := &TelemetryRecording{}
	ctx, t.cancel = context.WithCancel(ctx)
	if hc == nil {
		hc = http.DefaultClient
	}
	t.wg.Go(func() { t.rec.sample(ctx, gpu, gpuEvery, hc, base, engEvery) })
	return t
}

// Stop ends the sampling and returns the summary, the peak VRAM (GiB, all
// GPUs), its source and whether a clock or thermal throttle was seen.
func (t *TelemetryRecording) Stop() (Telemetry, float64, string, bool) {
	t.cancel()
	t.wg.Wait()
	return t.rec.summary()
}
