package trial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Client sends streaming completion requests to one OpenAI-compatible
// server and times them. It is safe for concurrent use; all requests share
// one transport with enough idle connections for the highest concurrency.
type Client struct {
	base    string
	model   string
	timeout time.Duration
	hc      *http.Client
	tr      *http.Transport
	bufs    sync.Pool
}

// NewClient returns a client for base (e.g. "http://127.0.0.1:8000") and the
// served model name. timeout bounds each request (0: none).
func NewClient(base, model string, timeout time.Duration) *Client {
	tr := &http.Transport{
		Proxy:               nil, // loopback engine: never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 8192,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		WriteBufferSize:     32 << 10,
		ReadBufferSize:      4 << 10,
	}
	c := &Client{base: base, model: model, timeout: timeout, tr: tr, hc: &http.Client{Transport: tr}}
	c.bufs.New = func() any { return newSSEReader(nil) }
	return c
}

// Close releases idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// promptToken is the token id at position j of request idx: the shared
// prefix is the same for all requests, the rest differs per request so that
// prefix caching only ever hits the declared prefix. Ids stay in [1000,
// 31000), valid for every common vocabulary.
func promptToken(idx, prefix, j, salt int) int {
	if j < prefix {
		return 1000 + (j*31)%30000
	}
	return 1000 + (idx*7919+j*131+salt*104729+17)%30000
}

// body renders the request JSON of vLLM bench's completions call with a
// token-id prompt of exact length; salt varies the non-prefix tokens (so
// the same request index on another load level is a new prompt).
func (c *Client) body(spec RequestSpec, salt int) []byte {
	b := make([]byte, 0, 160+6*spec.PromptLen)
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, c.model)
	b = append(b, `,"prompt":[`...)
	for j := range spec.PromptLen {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(promptToken(spec.Index, spec.PrefixLen, j, salt)), 10)
	}
	b = append(b, `],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(max(1, spec.OutputLen)), 10)
	b = append(b, `,"ignore_eos":true,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`...)
	return b
}

// Do sends one request and returns its record; runStart is the origin of
// Record.Start. Failures are recorded in Record.Err, never returned.
func (c *Client) Do(ctx context.Context, spec RequestSpec, runStart time.Time) Record {
	return c.do(ctx, spec, runStart, 0)
}

func (c *Client) do(ctx context.Context, spec RequestSpec, runStart time.Time, salt int) Record {
	rec := Record{Index: spec.Index, PromptLen: spec.PromptLen, OutputLen: 0, Warmup: spec.Warmup}
	body := c.body(spec, salt)
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		rec.Err = err.Error()
		return rec
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Request-Id", "tuner-"+strconv.Itoa(spec.Index))
	t0 := time.Now()
	rec.Start = t0.Sub(runStart)
	resp, err := c.hc.Do(req)
	if err != nil {
		rec.Err = requestError(ctx, err)
		rec.End = time.Since(t0)
		return rec
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		rec.Err = fmt.Sprintf("http %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		rec.End = time.Since(t0)
		return rec
	}
	sr := c.bufs.Get().(*sseReader)
	sr.reset(resp.Body)
	defer func() { sr.reset(nil); c.bufs.Put(sr) }()
	rec.Chunks = make([]time.Duration, 0, max(1, spec.OutputLen))
	tokens := -1
	for {
		data, err := sr.Next()
		now := time.Since(t0)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				rec.Err = requestError(ctx, fmt.Errorf("stream: %w", err))
			}
			break
		}
		ch, err := parseChunk(data)
		if err != nil {
			rec.Err = fmt.Sprintf("malformed chunk: %.120q", data)
			break
		}
		if ch.Done {
			break
		}
		if ch.Error {
			rec.Err = "engine error: " + ch.Message
			break
		}
		if ch.Content {
			rec.Chunks = append(rec.Chunks, now)
			rec.End = now
		}
		if ch.Usage {
			tokens = ch.CompletionTokens
			if ch.PromptTokens > 0 {
				rec.PromptLen = ch.PromptTokens
			}
		}
	}
	if tokens >= 0 {
		rec.OutputLen = tokens
	} else {
		rec.OutputLen = len(rec.Chunks)
	}
	if rec.Err == "" && len(rec.Chunks) == 0 {
		rec.Err = "no content chunk"
	}
	if rec.Err != "" && rec.End == 0 {
		rec.End = time.Since(t0)
	}
	return rec
}

func requestError(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timeout"
	case errors.Is(ctx.Err(), context.Canceled):
		return "cancelled"
	}
	return err.Error()
}

// Gate decides whether request next (in spec order) may be issued, given
// the records completed so far (in completion order; read-only, not to be
// retained). It is called with the driver's lock held, one call at a time.
type Gate func(next int, done []Record) bool

// Load is one load level: a closed loop at Concurrency (> 0), or an open
// loop releasing each request at its RequestSpec.At.
type Load struct {
	Concurrency int
	Rate        float64 // informational for open loop; the offsets are in the specs
	// Salt makes the prompts differ from another level's with the same
	// request indices (no accidental prefix-cache hits across levels).
	Salt int
}

// Drive issues specs at the load, each request in its own goroutine, and
// returns the records of every issued request in spec order. In open loop a
// pacer releases requests at their offsets whatever the server does; in
// closed loop Concurrency workers each send the next request as soon as
// their previous one ends (and its RequestSpec.Think has passed). gate (nil: all) can stop issuing early; ctx
// cancellation stops issuing and cancels requests in flight (their records
// say "cancelled"). Drive returns when every issued request has ended.
func (c *Client) Drive(ctx context.Context, specs []RequestSpec, load Load, gate Gate) []Record {
	d := &driver{c: c, specs: specs, gate: gate, recs: make([]Record, len(specs)), start: time.Now()}
	var wg sync.WaitGroup
	if load.Concurrency > 0 {
		for range min(load.Concurrency, len(specs)) {
			wg.Go(func() {
				for {
					i, ok := d.next(ctx)
					if !ok {
						return
					}
					d.finish(i, c.do(ctx, specs[i], d.start, load.Salt))
					if !sleepCtx(ctx, specs[i].Think) {
						return
					}
				}
			})
		}
	} else {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
	pace:
		for {
			i, ok := d.peek(ctx)
			if !ok {
				break
			}
			if wait := time.Until(d.start.Add(specs[i].At)); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					timer.Stop()
					break pace
				case <-timer.C:
				}
			}
			if _, ok := d.next(ctx); !ok {
				break
			}
			wg.Go(func() { d.finish(i, c.do(ctx, specs[i], d.start, load.Salt)) })
		}
	}
	wg.Wait()
	return d.recs[:d.issued]
}

// sleepCtx waits d (a closed-loop user's think time); false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

type driver struct {
	c      *Client
	specs  []RequestSpec
	gate   Gate
	start  time.Time
	mu     sync.Mutex
	issued int
	closed bool
	recs   []Record
	done   []Record
}

// peek returns the index of the next request without issuing it.
func (d *driver) peek(ctx context.Context) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.issued >= len(d.specs) || ctx.Err() != nil {
		return 0, false
	}
	return d.issued, true
}

// next claims the next request if the gate allows it.
func (d *driver) next(ctx context.Context) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.issued >= len(d.specs) || ctx.Err() != nil {
		return 0, false
	}
	if d.gate != nil && !d.gate(d.issued, d.done) {
		d.closed = true
		return 0, false
	}
	i := d.issued
	d.issued++
	return i, true
}

func (d *driver) finish(i int, rec Record) {
	d.mu.Lock()
	d.recs[i] = rec
	d.done = append(d.done, rec)
	d.mu.Unlock()
}
