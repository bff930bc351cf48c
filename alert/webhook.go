package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Config configures a Sender.
type Config struct {
	URL    string
	Format Format
	// MaxAttempts bounds the POSTs of one event (first try included).
	MaxAttempts int
	// Backoff is the wait after the first failed attempt; it doubles after
	// each further one, up to MaxBackoff (a Retry-After answer waits that
	// long instead, within MaxBackoff).
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// Log receives one JSON line per delivery (nil: none); LogFile opens
	// one in append mode (OpenLog).
	Log io.Writer
}

// DefaultConfig delivers as Alertmanager alerts, five attempts from 1 s
// apart up to 30 s, 10 s each.
func DefaultConfig() Config {
	return Config{Format: FormatAlertmanager, MaxAttempts: 5, Backoff: time.Second, MaxBackoff: 30 * time.Second, Timeout: 10 * time.Second}
}

// Delivery is the record of one event's delivery.
type Delivery struct {
	Time     time.Time `json:"time"`
	URL      string    `json:"url"`
	Format   Format    `json:"format"`
	Kind     Kind      `json:"kind"`
	Summary  string    `json:"summary"`
	Attempts int       `json:"attempts"`
	Status   int       `json:"status,omitempty"` // the last HTTP status
	OK       bool      `json:"ok"`
	Error    string    `json:"error,omitempty"`
}

// ErrNotDelivered is a delivery that failed (every attempt, or a refusal
// that retrying cannot fix).
var ErrNotDelivered = errors.New("alert not delivered")

// Sender delivers events to one webhook. Safe for concurrent use.
type Sender struct {
	cfg   Config
	hc    *http.Client
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
	mu    sync.Mutex // serialises the log
}

// Option adjusts a Sender.
type Option func(*Sender)

// WithClock replaces the waits between attempts and the clock (tests).
func WithClock(sleep func(context.Context, time.Duration) error, now func() time.Time) Option {
	return func(s *Sender) { s.sleep, s.now = sleep, now }
}

// WithHTTPClient sets the client (default: a plain one with cfg.Timeout).
func WithHTTPClient(hc *http.Client) Option { return func(s *Sender) { s.hc = hc } }

// NewSender checks cfg and builds a Sender.
func NewSender(cfg Config, opts ...Option) (*Sender, error) {
	d := DefaultConfig()
	if cfg.URL == "" {
		return nil, errors.New("alert: no webhook URL")
	}
	if _, err := ParseFormat(string(cfg.Format)); err != nil {
		return nil, err
	}
	if cfg.Format == "" {
		cfg.Format = d.Format
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = d.MaxAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = d.Backoff
	}
	if cfg.MaxBackoff < cfg.Backoff {
		cfg.MaxBackoff = max(cfg.Backoff, d.MaxBackoff)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = d.Timeout
	}
	s := &Sender{cfg: cfg, hc: &http.Client{Timeout: cfg.Timeout}, sleep: sleepCtx, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// OpenLog opens path for appending delivery records (mode 0600).
func OpenLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("alert log: %w", err)
	}
	return f, nil
}

// Send delivers ev, retrying transient failures, records the delivery and
// returns it; an undelivered event is also ErrNotDelivered.
func (s *Sender) Send(ctx context.Context, ev Event) (Delivery, error) {
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	d := Delivery{Time: s.now(), URL: s.cfg.URL, Format: s.cfg.Format, Kind: ev.Kind, Summary: ev.Summary}
	body, err := ev.Payload(s.cfg.Format)
	if err != nil {
		d.Error = err.Error()
		return d, s.record(d, err)
	}
	wait := s.cfg.Backoff
	for {
		d.Attempts++
		status, retryAfter, err := s.post(ctx, body)
		d.Status = status
		switch {
		case err == nil && status < 300:
			d.OK, d.Error = true, ""
			return d, s.record(d, nil)
		case err != nil:
			d.Error = err.Error()
		default:
			d.Error = "HTTP " + strconv.Itoa(status)
		}
		retryable := err != nil || status == http.StatusTooManyRequests || status >= 500
		if !retryable || d.Attempts >= s.cfg.MaxAttempts || ctx.Err() != nil {
			return d, s.record(d, fmt.Errorf("%w to %s after %d attempt(s): %s", ErrNotDelivered, s.cfg.URL, d.Attempts, d.Error))
		}
		w := wait
		if retryAfter > 0 {
			w = retryAfter
		}
		if err := s.sleep(ctx, min(w, s.cfg.MaxBackoff)); err != nil {
			d.Error += "; " + err.Error()
			return d, s.record(d, fmt.Errorf("%w to %s: %w", ErrNotDelivered, s.cfg.URL, err))
		}
		wait = min(2*wait, s.cfg.MaxBackoff)
	}
}

// post makes one attempt: the status, a Retry-After in seconds, or the
// transport error.
func (s *Sender) post(ctx context.Context, body []byte) (int, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	var ra time.Duration
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
		ra = time.Duration(n) * time.Second
	}
	return resp.StatusCode, ra, nil
}

// record appends d to the log; err passes through (a log write failure is
// joined to it).
func (s *Sender) record(d Delivery, err error) error {
	if s.cfg.Log == nil {
		return err
	}
	b, merr := json.Marshal(d)
	if merr != nil {
		return errors.Join(err, merr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, werr := s.cfg.Log.Write(append(b, '\n')); werr != nil {
		return errors.Join(err, fmt.Errorf("alert log: %w", werr))
	}
	return err
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
