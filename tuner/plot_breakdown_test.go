package tuner

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// svgRects returns the filled rectangles of an SVG by fill colour: vgsvg
// writes each as <path d="Mx0,y0Lx0,y1Lx1,y1Lx1,y0Z" style="fill:#RRGGBB">.
func svgRects(t *testing.T, b []byte) map[string][][4]float64 {
	t.Helper()
	paths, err := svgPaths(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][4]float64{}
	for _, p := range paths {
		d, style := p[0], p[1]
		fill, ok := strings.CutPrefix(style, "fill:#")
		if !ok || !strings.HasSuffix(d, "Z") {
			continue
		}
		var x0, y0, x1, y1, x2, y2, x3, y3 float64
		if _, err := fmt.Sscanf(d, "M%g,%gL%g,%gL%g,%gL%g,%gZ", &x0, &y0, &x1, &y1, &x2, &y2, &x3, &y3); err != nil || x0 != x1 || y1 != y2 {
			continue
		}
		out[strings.ToLower(fill)] = append(out[strings.ToLower(fill)], [4]float64{x0, y0, x2, y2})
	}
	return out
}

// TestBreakdownChartStacksParts: each level is one column of four
// rectangles (queue, prefill, decode, client; a negative client share draws
// as nothing) stacked without gaps, with heights proportional to the ms.
func TestBreakdownChartStacksParts(t *testing.T) {
	bars := []BreakdownBar{
		BarOf("c=4", &trial.Breakdown{Queue: trial.PhaseDist{Mean: 6}, Prefill: trial.PhaseDist{Mean: 27}, Decode: trial.PhaseDist{Mean: 242}, ClientMS: 1.4}),
		{Label: "c=24", Queue: 553, Prefill: 33, Decode: 288, Client: -0.5},
	}
	c, err := NewBreakdownChart(bars, BreakdownOptions{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, "svg"); err != nil {
		t.Fatal(err)
	}
	rects := svgRects(t, buf.Bytes())
	scale := math.NaN() // points per ms
	for k := range BreakdownParts {
		col := breakdownColours[k]
		hex := fmt.Sprintf("%02x%02x%02x", col.R, col.G, col.B)
		var cols [][4]float64
		for _, r := range rects[hex] {
			if r[2]-r[0] > 30 { // the legend's thumbnails are narrower
				cols = append(cols, r)
			}
		}
		if len(cols) != len(bars) {
			t.Fatalf("%s: %d bars, want %d", BreakdownParts[k], len(cols), len(bars))
		}
		for i, r := range cols {
			want := bars[i].parts()[k]
			h := math.Abs(r[3] - r[1])
			if want == 0 {
				if h > 1e-6 {
					t.Errorf("%s %s: height %v for 0 ms", bars[i].Label, BreakdownParts[k], h)
				}
				continue
			}
			if math.IsNaN(scale) {
				scale = h / want
			}
			if math.Abs(h/want-scale) > 0.01*scale+0.01 {
				t.Errorf("%s %s: %.2f pt for %.1f ms, scale %.4f pt/ms", bars[i].Label, BreakdownParts[k], h, want, scale)
			}
		}
	}
	if _, err := NewBreakdownChart(nil, BreakdownOptions{}); err == nil {
		t.Error("empty chart drawn")
	}
	var html bytes.Buffer
	if err := WriteBreakdownHTML(&html, bars, BreakdownOptions{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"stack":"e2el"`, `"name":"queue"`, `"name":"client"`, `"c=24"`, `553`} {
		if !strings.Contains(html.String(), s) {
			t.Errorf("HTML lacks %s", s)
		}
	}
}

// TestTraceChart: one filled circle per window that met the SLO (crosses
// for the others), both panels in one SVG; the HTML puts the tail on a
// second axis.
func TestTraceChart(t *testing.T) {
	fb := &trial.Feedback{Metric: "ttft_p95", Target: 500, Sustained: 7.6, Bounded: true, Windows: []trial.FeedbackWindow{
		{StartS: 0, Seconds: 10, Rate: 4, Tail: 120, Met: true, Phase: trial.FeedbackProbe},
		{StartS: 10, Seconds: 10, Rate: 8, Tail: 900, Met: false, Phase: trial.FeedbackProbe},
		{StartS: 20, Seconds: 10, Rate: 4.4, Tail: 150, Met: true, Phase: trial.FeedbackHold},
		{StartS: 30, Seconds: 10, Rate: 4.8, Tail: 180, Met: true, Phase: trial.FeedbackHold},
	}}
	c, err := NewTraceChart([]TraceSeries{TraceOf("chat", fb)}, TraceOptions{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, "svg"); err != nil {
		t.Fatal(err)
	}
	if pts := svgCircles(t, bytes.NewReader(buf.Bytes())); len(pts) != 3 {
		t.Errorf("%d circles, want 3 (the windows that met the SLO)", len(pts))
	}
	for _, s := range []string{"offered load (req/s)", "ttft_p95 (ms)", "time (s)", "sustained 7.6 req/s", "target ttft_p95"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	var png bytes.Buffer
	if err := c.Write(&png, "png"); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
		t.Errorf("png: %v", err)
	}
	var html bytes.Buffer
	if err := WriteTraceHTML(&html, []TraceSeries{TraceOf("chat", fb)}, TraceOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), `"yAxisIndex":1`) || !strings.Contains(html.String(), "chat ttft_p95") {
		t.Error("HTML lacks the tail on the second axis")
	}
	if _, err := NewTraceChart(nil, TraceOptions{}); err == nil {
		t.Error("empty trace drawn")
	}
}
