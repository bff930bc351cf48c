package tuner

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Status is a snapshot of the loop for progress display.
type Status struct {
	Done      int           // trials finished in this study (search + repeats)
	Total     int           // planned total, 0 when only a wall budget bounds it
	Phase     Phase         // phase of the running or last trial
	Elapsed   time.Duration // since this run started
	ETA       time.Duration // estimate of the time left, -1 when unknown
	Best      float64       // best SLO-feasible throughput so far (NaN: none)
	BestUnit  string        // throughput metric name
	FrontSize int           // SLO-feasible front size
	Last      string        // last trial's verdict line
	Running   string        // config ID of the running trial ("" between trials)
}

func (s Status) line() string {
	var b strings.Builder
	total := "?"
	if s.Total > 0 {
		total = fmt.Sprint(s.Total)
	}
	fmt.Fprintf(&b, "trial %d/%s", s.Done, total)
	fmt.Fprintf(&b, " | elapsed %s", fmtDur(s.Elapsed))
	if s.ETA >= 0 {
		fmt.Fprintf(&b, " ETA %s", fmtDur(s.ETA))
	}
	if math.IsNaN(s.Best) {
		b.WriteString(" | best: none within SLO")
	} else {
		fmt.Fprintf(&b, " | best %.1f %s", s.Best, s.BestUnit)
	}
	fmt.Fprintf(&b, " | front %d", s.FrontSize)
	if s.Last != "" {
		fmt.Fprintf(&b, " | last %s", s.Last)
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	if m > 0 {
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// progress renders the loop's status. On a terminal a live progress bar is
// redrawn every second; otherwise one plain line is written per trial.
type progress interface {
	started(s Status)
	finished(s Status, trialLine string)
	close()
}

func newProgress(w io.Writer, terminal bool, status func() Status) progress {
	if w == nil {
		w = io.Discard
	}
	if !terminal {
		return &plainProgress{w: w}
	}
	return newLiveProgress(w, status)
}

// plainProgress writes one line per finished trial (logs, CI, pipes).
type plainProgress struct{ w io.Writer }

func (p *plainProgress) started(Status) {}
func (p *plainProgress) finished(s Status, trialLine string) {
	fmt.Fprintf(p.w, "%s\n  %s\n", trialLine, s.line())
}
func (p *plainProgress) close() {}

// liveProgress draws a progressbar line that a ticker keeps current and
// prints each finished trial's line above it.
type liveProgress struct {
	mu     sync.Mutex
	w      io.Writer
	bar    *progressbar.ProgressBar
	status func() Status
	stop   chan struct{}
	done   chan struct{}
}

func newLiveProgress(w io.Writer, status func() Status) *liveProgress {
	s := status()
	max := s.Total
	if max <= 0 {
		max = -1 // spinner: length unknown
	}
	p := &liveProgress{
		w:      w,
		status: status,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		bar: progressbar.NewOptions(max,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(20),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetDescription(s.line()),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionThrottle(0),
		),
	}
	_ = p.bar.Set(s.Done)
	go p.tick()
	return p
}

func (p *liveProgress) tick() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.bar.Describe(p.describe(p.status()))
			p.mu.Unlock()
		}
	}
}

func (p *liveProgress) describe(s Status) string {
	d := s.line()
	if s.Running != "" {
		d += " | running " + s.Running
	}
	return d
}

func (p *liveProgress) started(s Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.Total > 0 && s.Total != p.bar.GetMax() {
		p.bar.ChangeMax(s.Total)
	}
	p.bar.Describe(p.describe(s))
}

func (p *liveProgress) finished(s Status, trialLine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.bar.Clear()
	fmt.Fprintf(p.w, "\r%s\n", trialLine)
	if s.Total > 0 && s.Total != p.bar.GetMax() {
		p.bar.ChangeMax(s.Total)
	}
	p.bar.Describe(p.describe(s))
	_ = p.bar.Set(s.Done)
}

func (p *liveProgress) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.bar.Clear()
	fmt.Fprint(p.w, "\r")
}
