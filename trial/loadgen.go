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
	"strings"
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
	maxLine int
	chat    bool // /v1/chat/completions instead of /v1/completions
	hc      *http.Client
	tr      *http.Transport
	bufs    sync.Pool
}

// ClientOption sets an optional knob of a Client.
type ClientOption func(*Client)

// WithMaxLineBytes bounds one SSE line and one event of a response (<= 0:
// DefaultMaxLineBytes); a longer one fails the request as a malformed
// stream, so memory stays bounded whatever the server sends.
func WithMaxLineBytes(n int) ClientOption {
	return func(c *Client) {
		if n > 0 {
			c.maxLine = n
		}
	}
}

// Endpoint names the API a load is sent to.
type Endpoint string

// The endpoints a Client can drive: vLLM bench's "openai" and "openai-chat"
// backends.
const (
	EndpointCompletions Endpoint = "completions" // POST /v1/completions, token-id prompts
	EndpointChat        Endpoint = "chat"        // POST /v1/chat/completions, text prompts
)

// ParseEndpoint checks an endpoint name ("" is completions).
func ParseEndpoint(s string) (Endpoint, error) {
	switch e := Endpoint(s); e {
	case "", EndpointCompletions:
		return EndpointCompletions, nil
	case EndpointChat:
		return e, nil
	}
	return "", fmt.Errorf("endpoint %q: want completions or chat", s)
}

// WithEndpoint selects the API (default completions). The chat endpoint is
// for servers and models that only serve chat; its metrics are the same:
// a token chunk is one whose delta carries text.
func WithEndpoint(e Endpoint) ClientOption {
	return func(c *Client) { c.chat = e == EndpointChat }
}

// NewClient returns a client for base (e.g. "http://127.0.0.1:8000") and the
// served model name. timeout bounds each request (0: none).
func NewClient(base, model string, timeout time.Duration, opts ...ClientOption) *Client {
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
	c := &Client{base: base, model: model, timeout: timeout, maxLine: DefaultMaxLineBytes, tr: tr, hc: &http.Client{Transport: tr}}
	for _, o := range opts {
		o(c)
	}
	c.bufs.New = func() any { return newSSEReader(nil, c.maxLine) }
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

// modelFor is the request's model: its tenant's LoRA adapter, else the
// served model.
func (c *Client) modelFor(spec RequestSpec) string {
	if spec.Tenant != "" {
		return spec.Tenant
	}
	return c.model
}

// body renders the request JSON of vLLM bench's completions call with a
// token-id prompt of exact length; salt varies the non-prefix tokens (so
// the same request index on another load level is a new prompt).
func (c *Client) body(spec RequestSpec, salt int) []byte {
	b := make([]byte, 0, 160+6*spec.PromptLen)
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, c.modelFor(spec))
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

// chatBody renders vLLM bench's chat call (openai-chat backend) with the
// prompt as text: one word per prompt token, drawn from words that are one
// token each in common BPE vocabularies (a space and three letters, also
// one token by vLLM-sim's four-bytes rule). The chat template adds a few
// tokens; the usage chunk's prompt_tokens corrects the record. max_tokens
// is sent beside max_completion_tokens for servers that know only one.
func (c *Client) chatBody(spec RequestSpec, salt int) []byte {
	b := make([]byte, 0, 256+4*spec.PromptLen)
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, c.modelFor(spec))
	b = append(b, `,"messages":[{"role":"user","content":"`...)
	for j := range spec.PromptLen {
		w := promptWord(spec.Index, spec.PrefixLen, j, salt)
		if j == 0 {
			w = w[1:]
		}
		b = append(b, w...)
	}
	n := int64(max(1, spec.OutputLen))
	b = append(b, `"}],"max_completion_tokens":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"ignore_eos":true,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`...)
	return b
}

// promptWord is the word at position j of request idx's chat prompt: a
// hash of the position alone in the shared prefix, of the position, request
// and salt after it, so that two requests share no block of words past the
// prefix (a word index derived from promptToken's arithmetic sequence
// repeated whole prompts every 15 requests: prefix-cache hits the workload
// never asked for).
func promptWord(idx, prefix, j, salt int) string {
	h := uint64(j) * 0xc2b2ae3d27d4eb4f
	if j >= prefix {
		// The constant keeps request 0 of salt 0 off the prefix words.
		h += uint64(idx)*0x9e3779b97f4a7c15 + uint64(salt)*0x165667b19e3779f9 + 0x2545f4914f6cdd1d
	}
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9 // splitmix64's finaliser
	h = (h ^ h>>27) * 0x94d049bb133111eb
	h ^= h >> 31
	return promptWords[h%uint64(len(promptWords))]
}

// promptWords are the words of chat prompts (see chatBody), each with its
// leading space.
var promptWords = func() []string {
	ws := strings.Fields(`the and for you not are but can all any new one out way day man how its who did get may him old see
now use two boy her has had let put say she too own set why ask men run end big far few top red yes air sea sun car dog cat box
cup hot low war law art job key age act add bed bit buy cut eat egg eye fit fly fun gas hat hit ice kid lie lot map mix net oil
pay pen pie pop raw row sad sit sky son tea ten tie toy try van web win wet yet zoo arm bag bus dry fan fix gap hay jam lab leg
mad mom nod odd pan pig rat rub sum tap tip tub via wax`)
	for i, w := range ws {
		ws[i] = " " + w
	}
	return ws
}()

// Do sends one request and returns its record; runStart is the origin of
// Record.Start. Failures are recorded in Record.Err, never returned.
func (c *Client) Do(ctx context.Context, spec RequestSpec, runStart time.Time) Record {
	return c.do(ctx, spec, runStart, 0)
}

func (c *Client) do(ctx context.Context, spec RequestSpec, runStart time.Time, salt int) Record {
	rec := Record{Index: spec.Index, PromptLen: spec.PromptLen, OutputLen: 0, Warmup: spec.Warmup, Requested: max(1, spec.OutputLen), Tenant: spec.Tenant}
	path, body, parse := "/v1/completions", []byte(nil), parseChunk
	if c.chat {
		path, body, parse = "/v1/chat/completions", c.chatBody(spec, salt), parseChatChunk
	} else {
		body = c.body(spec, salt)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
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
	readStream(ctx, sr, parse, spec, t0, &rec)
	if rec.Err != "" && rec.End == 0 {
		rec.End = time.Since(t0)
	}
	return rec
}

// readStream reads a response's events into rec: the arrival of each chunk
// that carries text (a token chunk), the usage chunk's counts, an error
// event; then checks the usage against the chunks (checkUsage). t0 is when
// the request was sent.
func readStream(ctx context.Context, sr *sseReader, parse func([]byte) (chunk, error), spec RequestSpec, t0 time.Time, rec *Record) {
	// Chunks are stamped when the read that completed them returned, not
	// when the parser reaches them: events that came in one read share its
	// time, and parsing the first ones does not make the later ones late.
	rec.Chunks = make([]time.Duration, 0, max(1, spec.OutputLen))
	tokens := -1
	limit := maxEvents(spec)
	for events := 1; ; events++ {
		data, err := sr.Next()
		now := sr.at().Sub(t0)
		if err != nil {
			switch {
			case errors.Is(err, errStreamTooLong):
				rec.Err = "malformed stream: " + err.Error()
			case !errors.Is(err, io.EOF):
				rec.Err = requestError(ctx, fmt.Errorf("stream: %w", err))
			}
			break
		}
		if events > limit {
			// Far more chunks than asked: excess tokens, cut off here so
			// that a server streaming without end cannot grow the record.
			rec.Err = errExcessTokens + fmt.Sprintf("more than %d events for %d prompt tokens and max_tokens %d: stream dropped", limit, spec.PromptLen, max(1, spec.OutputLen))
			break
		}
		ch, err := parse(data)
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
	checkUsage(rec, tokens)
	if rec.Err == "" && len(rec.Chunks) == 0 {
		rec.Err = "no content chunk"
	}
}

// maxEvents bounds the events of one response, so that an endless stream
// of chunks ends: an honest server sends one per token at most, plus a
// role chunk, usage, [DONE] and a few empty chunks (a split multi-byte
// character). The bound is loose on purpose: a server that echoes the
// prompt (up to prompt + max_tokens chunks) stays under it, and the usage
// check names what it did.
func maxEvents(spec RequestSpec) int {
	return 4*(max(0, spec.PromptLen)+max(1, spec.OutputLen)) + 64
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
	if load.Concurrency > 0 {
		c.Warm(ctx, min(load.Concurrency, len(specs)))
	}
	return c.drive(ctx, time.Now(), specs, load, gate)
}

// warmTimeout bounds Warm: a server that does not answer leaves the dials
// to the requests, which then fail or succeed on their own.
const warmTimeout = 10 * time.Second

// Warm opens n connections to the server and leaves them idle in the pool,
// so that a load's first wave does not pay n dials (and the transport's
// buffers and goroutines) while its first chunks arrive, which stamped
// them up to 175 ms late at 2,000 streams. Each connection carries a GET
// /v1/models whose response is held until all n have come back, which
// forces n distinct connections. Errors are ignored.
func (c *Client) Warm(ctx context.Context, n int) {
	if n <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	var got, wg sync.WaitGroup
	release := make(chan struct{})
	got.Add(n)
	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/models", nil)
			var resp *http.Response
			if err == nil {
				resp, err = c.hc.Do(req)
			}
			got.Done()
			if err != nil {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		})
	}
	got.Wait()
	close(release)
	wg.Wait()
}

// rampStep spreads the closed loop's first wave: worker i sends its first
// request i x rampStep after the start (100 ms for 2,000 workers), so the
// first chunks of the early requests are not stamped behind the sending
// of all the others.
const rampStep = 50 * time.Microsecond

// drive is Drive with the origin of Record.Start given (the lag benchmark
// maps it to the server's clock).
func (c *Client) drive(ctx context.Context, start time.Time, specs []RequestSpec, load Load, gate Gate) []Record {
	d := &driver{c: c, specs: specs, gate: gate, recs: make([]Record, len(specs)), start: start}
	var wg sync.WaitGroup
	if load.Concurrency > 0 {
		for w := range min(load.Concurrency, len(specs)) {
			wg.Go(func() {
				if w > 0 && !sleepCtx(ctx, time.Until(d.start.Add(time.Duration(w)*rampStep))) {
					return
				}
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

// sleepCtx waits d (a ramp step, a closed-loop user's think time); false when ctx ended.
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
