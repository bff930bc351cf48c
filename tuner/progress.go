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
	Done      int           // search trials of the study, or this run's re-measurements in the repeat phase
	Total     int           // --trials, or the planned re-measurements; 0 when only a wall budget bounds the search
	Phase     Phase         // phase of the running or last trial
	Elapsed   time.Duration // since this run started
	ETA       time.Duration // estimate of the time left, -1 when unknown
	Best      float64       // best SLO-feasible throughput so far (NaN: none)
	BestUnit  string        // throughput metric name
	FrontSize int           // SLO-feasible front size
	Last      string        // last trial's verdict line
	Running   string        // config ID of the running trial ("" between trials)
}

// Line is the status as the CLI's progress line shows it.
func (s Status) Line() string { return s.line() }

func (s Status) line() string {
	var b strings.Builder
	total := "?"
	if s.Total > 0 {
		total = fmt.Sprint(s.Total)
	}
	what := "trial"
	if s.Phase == PhaseRepeat {
		what = "re-measurement"
	}
	fmt.Fprintf(&b, "%s %d/%s", what, s.Done, total)
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

func newProgress(w io.Writer, terminal bool, width int, status func() Status) progress {
	if w == nil {
		w = io.Discard
	}
	if !terminal {
		return &plainProgress{w: w}
	}
	if width <= 0 {
		width = 80
	}
	return newLiveProgress(w, width, status)
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
	room   int // columns left for the description beside the bar
	bar    *progressbar.ProgressBar
	status func() Status
	stop   chan struct{}
	done   chan struct{}
}

// barWidth is the width of the bar itself; the rest of the line is the
// status, cut to the terminal so the line never wraps (a wrapped line
// leaves a new line behind at every redraw).
const barWidth = 12

func newLiveProgress(w io.Writer, width int, status func() Status) *liveProgress {
	s := status()
	total := s.Total
	if total <= 0 {
		total = -1 // spinner: length unknown
	}
	// The bar renders as "100% |<bar>| (N/N) ": its widest form for the
	// largest N this run can show.
	n := len(fmt.Sprint(max(s.Total, 1) * 10))
	used := len(" 100% ||  ") + barWidth + 2*n + len("(/) ")
	p := &liveProgress{
		w:      w,
		room:   width - used - 1,
		status: status,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		bar: progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(barWidth),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetDescription(fit(s.line(), width-used-1)),
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
	return fit(d, p.room)
}

// fit cuts s to n columns (the status line is ASCII), marking the cut.
func fit(s string, n int) string {
	switch {
	case len(s) <= n:
		return s
	case n <= 3:
		return ""
	}
	return s[:n-3] + "..."
}

func (p *liveProgress) started(s Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar.Describe(p.describe(s))
	p.setCount(s)
}

// setCount moves the bar to s; the count first, so that a new phase's
// smaller N never renders the old count against it (300%).
func (p *liveProgress) setCount(s Status) {
	_ = p.bar.Set(min(s.Done, max(s.Total, 0)))
	if s.Total > 0 && s.Total != p.bar.GetMax() {
		p.bar.ChangeMax(s.Total) // the re-measurement has its own N
	}
	_ = p.bar.Set(s.Done)
}

func (p *liveProgress) finished(s Status, trialLine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.bar.Clear()
	fmt.Fprintf(p.w, "\r%s\n", trialLine)
	p.bar.Describe(p.describe(s))
	p.setCount(s)
}

func (p *liveProgress) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.bar.Clear()
	fmt.Fprint(p.w, "\r")
}

// hookProgress passes every status it shows to a hook as well.
type hookProgress struct {
	progress
	hook func(Status)
}

func (p hookProgress) started(s Status) {
	p.progress.started(s)
	p.hook(s)
}

func (p hookProgress) finished(s Status, trialLine string) {
	p.progress.finished(s, trialLine)
	p.hook(s)
}
