// Package fakestream is what the trial package's scripted engines share
// (the in-process streamServer of its tests and testdata/fakeengine, the
// stand-in for `vllm serve`): writing a completion's token chunks at a
// steady pace. For tests only.
package fakestream

import (
	"context"
	"net/http"
	"time"
)

// Tokens writes the chunk ev n times to w, flushing each, gap apart (0: at
// once); it stops early and returns false when ctx ends between chunks
// (the client went away).
func Tokens(ctx context.Context, w http.ResponseWriter, ev []byte, n int, gap time.Duration) bool {
	fl := w.(http.Flusher)
	var tick *time.Ticker
	if gap > 0 {
		tick = time.NewTicker(gap)
		defer tick.Stop()
	}
	for i := range n {
		if i > 0 && tick != nil {
			select {
			case <-ctx.Done():
				return false
			case <-tick.C:
			}
		}
		w.Write(ev)
		fl.Flush()
	}
	return true
}
