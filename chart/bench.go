package chart

import (
	"fmt"
	"image/color"
	"math"

	"github.com/vllm-tuner/tuner/trial"
)

// CurveSeries is one QPS-vs-latency curve (a benchmark cell): points in
// increasing load.
type CurveSeries struct {
	Name   string
	Points []CurvePoint
}

// CurvePoint is one load level: achieved QPS and a latency (ms).
type CurvePoint struct {
	Label   string // e.g. "c=64"
	QPS     float64
	Latency float64
}

// Curve draws achieved QPS (x) against a latency (y), a line with a filled
// circle per load level for each series, the SLO bound on the latency
// (limit > 0) as a red dashed line.
func Curve(title, metric string, limit float64, series []CurveSeries) Figure {
	p := Panel{X: Axis{Name: "achieved request rate", Unit: "req/s"}, Y: Axis{Name: metric, Unit: "ms"}}
	for i, s := range series {
		out := Series{Name: s.Name, Kind: Line, Colour: Cycle(i), Marker: Marker{Shape: Circle, Size: 7}}
		for _, q := range s.Points {
			out.Points = append(out.Points, Point{X: q.QPS, Y: q.Latency,
				Tip: fmt.Sprintf("%s %s\n%.2f req/s\n%s %.2f ms", s.Name, q.Label, q.QPS, metric, q.Latency)})
		}
		p.Series = append(p.Series, out)
	}
	if limit > 0 {
		p.Rules = append(p.Rules, Rule{Name: fmt.Sprintf("SLO %s <= %g ms", metric, limit), Value: limit, Colour: Red})
	}
	return Figure{Title: title, Subtitle: "achieved request rate vs " + metric, Page: "QPS vs latency", Panels: []Panel{p}}
}

// HistorySeries is one benchmark cell's metric over runs.
type HistorySeries struct {
	Name   string
	Points []HistoryPoint
}

// HistoryPoint is the metric in one run (Run indexes the runs).
type HistoryPoint struct {
	Run   int
	Value float64
	// Change marks a change point against the previous run (the gate's
	// regression or improvement); Regression says which.
	Change, Regression bool
}

// History draws each series over the runs in time order, a filled circle
// per run, change points as red (regression) or green (improvement)
// triangles.
func History(title, metric string, runs []string, series []HistorySeries) Figure {
	p := Panel{X: Axis{Name: "run (oldest first)", Categories: runs}, Y: Axis{Name: metric}}
	reg := Series{Name: "regression", Kind: Scatter, Colour: Red, Marker: Marker{Shape: Triangle, Size: 13}}
	imp := Series{Name: "improvement", Kind: Scatter, Colour: Green, Marker: Marker{Shape: Triangle, Size: 13}}
	for i, s := range series {
		out := Series{Name: s.Name, Kind: Line, Colour: Cycle(i), Marker: Marker{Shape: Circle, Size: 7}}
		for r := range runs {
			out.Points = append(out.Points, Point{X: float64(r), Missing: true})
		}
		for _, q := range s.Points {
			if q.Run < 0 || q.Run >= len(runs) {
				continue
			}
			pt := Point{X: float64(q.Run), Y: q.Value, Tip: fmt.Sprintf("%s\n%s\n%s %.4g", s.Name, runs[q.Run], metric, q.Value)}
			out.Points[q.Run] = pt
			if q.Change && q.Regression {
				reg.Points = append(reg.Points, pt)
			} else if q.Change {
				imp.Points = append(imp.Points, pt)
			}
		}
		p.Series = append(p.Series, out)
	}
	for _, s := range []Series{reg, imp} {
		if len(s.Points) > 0 {
			p.Series = append(p.Series, s)
		}
	}
	return Figure{Title: title, Page: "benchmark history", Panels: []Panel{p}}
}

// BreakdownBar is one load level's mean request time split into its parts
// (ms): the engine's queue, prefill and decode, and the client's share
// (network, HTTP, client queueing).
type BreakdownBar struct {
	Label                          string // e.g. "chat c=64"
	Queue, Prefill, Decode, Client float64
}

// BarOf is the bar of a level's breakdown.
func BarOf(label string, b *trial.Breakdown) BreakdownBar {
	return BreakdownBar{Label: label, Queue: b.Queue.Mean, Prefill: b.Prefill.Mean, Decode: b.Decode.Mean, Client: b.ClientMS}
}

// ResultBars are the bars of a trial's levels that have a breakdown,
// labelled by their load.
func ResultBars(r *trial.Result) []BreakdownBar {
	var bars []BreakdownBar
	if r == nil {
		return nil
	}
	for i := range r.Levels {
		l := &r.Levels[i]
		if b := l.Metrics.Breakdown; b != nil {
			label := fmt.Sprintf("%.4g req/s", l.Rate)
			if l.Concurrency > 0 {
				label = fmt.Sprintf("c=%d", l.Concurrency)
			}
			bars = append(bars, BarOf(label, b))
		}
	}
	return bars
}

// BreakdownParts names the stacked parts, bottom first.
var BreakdownParts = []string{"queue", "prefill", "decode", "client"}

// Breakdown draws one stacked bar per level: queue (red: waiting stands
// out), prefill and decode (blues), the client's share (grey) of the mean
// request time. A client share below zero (timer skew on loopback) draws
// as nothing.
func Breakdown(title string, bars []BreakdownBar) Figure {
	cats := make([]string, len(bars))
	for i, b := range bars {
		cats[i] = b.Label
	}
	p := Panel{X: Axis{Categories: cats}, Y: Axis{Name: "mean request time", Unit: "ms", Zero: true}}
	for k, part := range BreakdownParts {
		s := Series{Name: part, Kind: Bar, Stack: "time", Colour: []color.RGBA{Red, Blue, LightBlue, Grey}[k]}
		for i, b := range bars {
			v := [4]float64{b.Queue, b.Prefill, b.Decode, math.Max(0, b.Client)}[k]
			s.Points = append(s.Points, Point{Cat: i, Y: v, Tip: fmt.Sprintf("%s\n%s %.2f ms", b.Label, part, v)})
		}
		p.Series = append(p.Series, s)
	}
	return Figure{Title: title, Subtitle: "mean request time: queue, prefill, decode (engine histograms) and the client's share",
		Page: "where the time goes", Panels: []Panel{p}}
}

// TraceSeries is one feedback-load run over time: the offered rate and the
// held tail per window.
type TraceSeries struct {
	Name      string
	Metric    string  // e.g. ttft_p95
	Target    float64 // its bound (ms)
	Sustained float64 // req/s
	Windows   []trial.FeedbackWindow
}

// TraceOf is the series of a feedback outcome.
func TraceOf(name string, fb *trial.Feedback) TraceSeries {
	return TraceSeries{Name: name, Metric: fb.Metric, Target: fb.Target, Sustained: fb.Sustained, Windows: fb.Windows}
}

// Trace draws the feedback trace in two panels sharing the time axis: the
// offered rate (top, the sustained load dashed) and the held tail (below,
// the target as a red dashed line), windows meeting the SLO as filled
// circles, those missing it as crosses.
func Trace(title string, series []TraceSeries) Figure {
	rate := Panel{X: Axis{Name: "time", Unit: "s"}, Y: Axis{Name: "offered load", Unit: "req/s", Zero: true}}
	tail := Panel{X: Axis{Name: "time", Unit: "s"}, Y: Axis{Zero: true}}
	for i, s := range series {
		c := Cycle(i)
		r := Series{Name: s.Name + " req/s", Kind: Line, Colour: c}
		held := Series{Name: s.Name + " " + s.Metric, Kind: Line, Colour: c}
		met := Series{Name: s.Name + " window met", Kind: Scatter, Colour: c, Marker: Marker{Shape: Circle, Size: 7}}
		miss := Series{Name: s.Name + " window missed", Kind: Scatter, Colour: c, Marker: Marker{Shape: Cross, Size: 9}}
		end := 0.0
		for _, w := range s.Windows {
			mid := w.StartS + w.Seconds/2
			tip := fmt.Sprintf("%s at %.0f s\noffered %.3g req/s\n%s %.1f ms", s.Name, mid, w.Rate, s.Metric, w.Tail)
			r.Points = append(r.Points, Point{X: mid, Y: w.Rate, Tip: tip})
			q := Point{X: mid, Y: w.Tail, Tip: tip}
			held.Points = append(held.Points, q)
			if w.Met {
				met.Points = append(met.Points, q)
			} else {
				miss.Points = append(miss.Points, q)
			}
			end = w.StartS + w.Seconds
		}
		rate.Series = append(rate.Series, r)
		if s.Sustained > 0 {
			rate.Series = append(rate.Series, Series{Name: fmt.Sprintf("%s sustained %.3g req/s", s.Name, s.Sustained), Kind: Line, Colour: c, Dashed: true, Width: 1,
				Points: []Point{{X: 0, Y: s.Sustained}, {X: end, Y: s.Sustained}}})
		}
		tail.Series = append(tail.Series, held)
		for _, m := range []Series{met, miss} {
			if len(m.Points) > 0 {
				tail.Series = append(tail.Series, m)
			}
		}
		if i == 0 {
			tail.Y.Name, tail.Y.Unit = s.Metric, "ms"
			tail.Rules = append(tail.Rules, Rule{Name: fmt.Sprintf("target %s <= %g ms", s.Metric, s.Target), Value: s.Target, Colour: Red})
		}
	}
	return Figure{Title: title, Subtitle: "offered load and the held tail per window", Page: "feedback load", Panels: []Panel{rate, tail}}
}
