package chart

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

func svg(t *testing.T, f Figure) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, f, "svg"); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFrontSVGPointsEqualFront: the filled circles of the SVG are the
// front's members, each where the chart puts its values.
func TestFrontSVGPointsEqualFront(t *testing.T) {
	d := sampleFront()
	f := Front(d)
	b := svg(t, f)
	got, err := SVGMarkers(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(d.Front) {
		t.Fatalf("%d circles in the SVG, want %d (the front)", len(got), len(d.Front))
	}
	var want [][2]float64
	for _, c := range d.Front {
		x, y, err := Pixel(f, 0, c.Latency, c.Throughput)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, [2]float64{x, y})
	}
	for _, p := range [][][2]float64{got, want} {
		sort.Slice(p, func(i, j int) bool { return p[i][0] < p[j][0] })
	}
	for i := range got {
		// vgsvg writes 5 significant digits.
		if math.Abs(got[i][0]-want[i][0]) > 0.05 || math.Abs(got[i][1]-want[i][1]) > 0.05 {
			t.Errorf("circle %d at %v, want %v", i, got[i], want[i])
		}
	}
	for _, want := range []string{"vLLM default, 70.0 GiB<", "recommended, 70.4 GiB<", "SLO tpot_p99 &lt;= 22 ms<", "Pareto front<", "output_throughput (tok/s)", "tpot_p99 (ms)", "61.2 GiB<", "p = 0.008"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

// TestSVGLegendSamplesCarryMarkerColours: every legend entry's sample has
// the colour its markers are drawn in, and the roles are the palette's.
func TestSVGLegendSamplesCarryMarkerColours(t *testing.T) {
	for name, f := range allFigures() {
		t.Run(name, func(t *testing.T) {
			legend, err := SVGLegend(bytes.NewReader(svg(t, f)))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, p := range f.Panels {
				for _, s := range p.Series {
					if !s.NoLegend {
						want[s.Name] = strings.ToLower(Hex(s.Colour))
					}
				}
				for _, r := range p.Rules {
					want[r.Name] = Hex(Red)
				}
			}
			if f.Parallel != nil {
				for _, g := range f.Parallel.groups() {
					want[g.name] = Hex(g.colour)
				}
			}
			if len(legend) != len(want) {
				t.Errorf("legend %v, want the series %v", legend, want)
			}
			for _, e := range legend {
				col, ok := want[strings.TrimSuffix(strings.TrimSuffix(e.Name, " (beyond the right edge)"), " (beyond the top edge)")]
				if !ok {
					t.Errorf("legend entry %q is no series", e.Name)
					continue
				}
				if len(e.Colours) == 0 {
					t.Errorf("legend entry %q has no sample", e.Name)
				}
				for _, c := range e.Colours {
					if c != col {
						t.Errorf("legend entry %q sample colour %s, its series is %s", e.Name, c, col)
					}
				}
			}
		})
	}
	d := sampleFront()
	roles := map[string]string{FrontName: Hex(Blue), VRAMOnlyName: Hex(LightBlue), DefaultName: Hex(Orange), RecommendName: Hex(Green), OthersName: Hex(Grey)}
	legend, _ := SVGLegend(bytes.NewReader(svg(t, Front(d))))
	for _, e := range legend {
		if c, ok := roles[e.Name]; ok && (len(e.Colours) == 0 || e.Colours[len(e.Colours)-1] != c) {
			t.Errorf("%s: sample %v, want %s", e.Name, e.Colours, c)
		}
		delete(roles, e.Name)
	}
	if len(roles) > 0 {
		t.Errorf("legend lacks %v", roles)
	}
}

// TestFrontZoomsToData: an SLO bound far beyond the points does not
// stretch the axis; it is drawn at the edge with an arrow and its value,
// and the legend says so. Ticks are round steps (no 11.700000000000001).
func TestFrontZoomsToData(t *testing.T) {
	d := FrontData{Title: "t", Throughput: "output_throughput", Latency: "tpot_p99", LatencyLimit: 500, ThroughputLimit: 100, VRAMEstimated: true,
		Front: []Config{{ID: "a", Throughput: 1200, Latency: 11.7, VRAM: 40}, {ID: "b", Throughput: 2500, Latency: 25, VRAM: 72}}}
	f := Front(d)
	p := f.Panels[0]
	p.layout()
	if p.X.Max > 30 || p.Y.Min < 1000 {
		t.Fatalf("axes x [%g, %g] y [%g, %g]: not zoomed to the points", p.X.Min, p.X.Max, p.Y.Min, p.Y.Max)
	}
	b := string(svg(t, f))
	for _, want := range []string{"SLO tpot_p99 &lt;= 500 ms (beyond the right edge)", "SLO output_throughput &gt;= 100 tok/s (beyond the bottom edge)", "500 →", "100 ↓", "~40.0 GiB", "estimated"} {
		if !strings.Contains(b, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if strings.Contains(b, "00000000") {
		t.Error("a tick label carries binary noise")
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi          float64
		start, end, stp float64
		label           string
	}{
		{11.7, 25.3, 10, 30, 5, "10"},
		{0.013, 0.092, 0, 0.1, 0.02, "0.00"},
		{1180, 3240, 1000, 3500, 500, "1000"},
		{0.1, 1.2, 0, 1.25, 0.25, "0.00"},
		{5, 5, 4, 6, 0.5, "4.0"},
	} {
		start, end, step := Ticks(tc.lo, tc.hi, 5)
		if math.Abs(start-tc.start) > 1e-9 || math.Abs(end-tc.end) > 1e-9 || math.Abs(step-tc.stp) > 1e-9 {
			t.Errorf("Ticks(%g, %g) = %g, %g, %g; want %g, %g, %g", tc.lo, tc.hi, start, end, step, tc.start, tc.end, tc.stp)
		}
		if l := TickLabel(start, step); l != tc.label {
			t.Errorf("label of %g every %g: %q, want %q", start, step, l, tc.label)
		}
	}
}

// TestLabelsDoNotOverlap: close front members keep their VRAM labels
// apart (one may be left out), in both renderers' plot areas.
func TestLabelsDoNotOverlap(t *testing.T) {
	d := sampleFront()
	for i := range 6 { // a crowded corner
		d.Front = append(d.Front, Config{ID: fmt.Sprint(i), Throughput: 2600 + float64(i)*8, Latency: 14.3 + float64(i)*0.05, VRAM: 60 + float64(i)})
	}
	p := Front(d).Panels[0]
	p.layout()
	for _, size := range [][2]float64{{htmlLabelW, htmlLabelH}, {360, 220}} {
		sides := placeLabels(&p, size[0], size[1])
		var boxes []box
		shown := 0
		for k, side := range sides {
			if side == Hidden {
				continue
			}
			shown++
			q := p.Series[k[0]].Points[k[1]]
			x := (q.X - p.X.Min) / (p.X.Max - p.X.Min) * size[0]
			y := (1 - (q.Y-p.Y.Min)/(p.Y.Max-p.Y.Min)) * size[1]
			b := labelBox(q.Label, side, x, y, p.Series[k[0]].Marker.Size)
			for _, o := range boxes {
				if o.overlaps(b) {
					t.Errorf("%v: label %q overlaps another", size, q.Label)
				}
			}
			boxes = append(boxes, b)
		}
		if shown < 5 {
			t.Errorf("%v: only %d labels shown", size, shown)
		}
	}
}

// TestBreakdownStacksParts: each level is one column of rectangles
// stacked without gaps, heights proportional to the ms; a negative client
// share draws as nothing.
func TestBreakdownStacksParts(t *testing.T) {
	bars := []BreakdownBar{
		BarOf("c=4", &trial.Breakdown{Queue: trial.PhaseDist{Mean: 6}, Prefill: trial.PhaseDist{Mean: 27}, Decode: trial.PhaseDist{Mean: 242}, ClientMS: 1.4}),
		{Label: "c=24", Queue: 553, Prefill: 33, Decode: 288, Client: -0.5},
	}
	f := Breakdown("t", bars)
	items, err := readSVG(bytes.NewReader(svg(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	body := items[:legendStart(items)]
	scale := math.NaN()
	for k, s := range f.Panels[0].Series {
		var hs []float64
		for _, it := range body {
			var x0, y0, x1, y1, x2, y2, x3, y3 float64
			if !it.path || it.fill != strings.ToLower(Hex(s.Colour)) {
				continue
			}
			if _, err := fmt.Sscanf(it.d, "M%g,%gL%g,%gL%g,%gL%g,%gZ", &x0, &y0, &x1, &y1, &x2, &y2, &x3, &y3); err != nil {
				continue
			}
			hs = append(hs, math.Abs(y2-y0))
		}
		var want []float64
		for _, b := range bars {
			if v := [4]float64{b.Queue, b.Prefill, b.Decode, b.Client}[k]; v > 0 {
				want = append(want, v)
			}
		}
		if len(hs) < len(want) {
			t.Fatalf("%s: %d bars, want %d", s.Name, len(hs), len(want))
		}
		j := 0
		for _, h := range hs {
			if h < 1e-6 {
				continue
			}
			if math.IsNaN(scale) {
				scale = h / want[j]
			}
			if math.Abs(h/want[j]-scale) > 0.01*scale+0.01 {
				t.Errorf("%s: %.2f pt for %.1f ms, scale %.4f pt/ms", s.Name, h, want[j], scale)
			}
			j++
		}
	}
}

// TestTraceSVG: one filled circle per window that met the SLO, both
// panels in one SVG.
func TestTraceSVG(t *testing.T) {
	fb := &trial.Feedback{Metric: "ttft_p95", Target: 500, Sustained: 7.6, Bounded: true, Windows: []trial.FeedbackWindow{
		{StartS: 0, Seconds: 10, Rate: 4, Tail: 120, Met: true}, {StartS: 10, Seconds: 10, Rate: 8, Tail: 900, Met: false},
		{StartS: 20, Seconds: 10, Rate: 4.4, Tail: 150, Met: true}, {StartS: 30, Seconds: 10, Rate: 4.8, Tail: 180, Met: true},
	}}
	b := svg(t, Trace("t", []TraceSeries{TraceOf("chat", fb)}))
	if pts, err := SVGMarkers(bytes.NewReader(b)); err != nil || len(pts) != 3 {
		t.Errorf("%d circles (%v), want 3 (the windows that met the SLO)", len(pts), err)
	}
	for _, s := range []string{"offered load (req/s)", "ttft_p95 (ms)", "time (s)", "sustained 7.6 req/s", "target ttft_p95"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
}

// TestDrawingLeavesFigureAlone: a figure drawn once, as SVG or HTML, draws
// the same again, and Pixel places points where Write drew them. Figure is
// passed by value but its panels were shared, and the layout rounded the
// caller's axis ranges in place: the second drawing re-ticked the first
// one's range (the curve below went from 0-35 to 0-40 req/s), moving every
// marker off where Pixel put it.
func TestDrawingLeavesFigureAlone(t *testing.T) {
	figs := allFigures()
	figs["curve-reticked"] = Curve("run r1", "tpot_p99", 0, []CurveSeries{
		{Name: "closed", Points: []CurvePoint{{"c=2", 21.568, 97.567}, {"c=6", 30.031, 29.401}}},
		{Name: "open", Points: []CurvePoint{{"30 req/s", 30.126, 15.096}}}})
	for name, f := range figs {
		t.Run(name, func(t *testing.T) {
			first := svg(t, f)
			if err := WriteHTML(io.Discard, f); err != nil {
				t.Fatal(err)
			}
			if again := svg(t, f); !bytes.Equal(first, again) {
				t.Errorf("drawn again after SVG and HTML, the SVG differs")
			}
		})
	}
	f := figs["curve-reticked"]
	got, err := SVGMarkers(bytes.NewReader(svg(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Panels[0].Series {
		for _, q := range s.Points {
			x, y, err := Pixel(f, 0, q.X, q.Y)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(got, func(g [2]float64) bool { return math.Abs(g[0]-x) < 0.05 && math.Abs(g[1]-y) < 0.05 }) {
				t.Errorf("%s (%g, %g): no marker at %.2f, %.2f (markers %v)", s.Name, q.X, q.Y, x, y, got)
			}
		}
	}
}
