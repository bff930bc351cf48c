package tuner

import (
	"bytes"
	"io"
	"math"
	"sort"
	"strings"
	"testing"
)

// svgCircles returns the front markers of an SVG chart (tuner.SVGMarkers).
func svgCircles(t *testing.T, r io.Reader) [][2]float64 {
	t.Helper()
	pts, err := SVGMarkers(r)
	if err != nil {
		t.Fatal(err)
	}
	return pts
}

func TestFrontChartSVGPointsEqualFront(t *testing.T) {
	front := []ChartPoint{
		{Label: "a", Throughput: 1200, Latency: 12, VRAM: 40},
		{Label: "b", Throughput: 2500, Latency: 25, VRAM: 72},
		{Label: "c", Throughput: 3100, Latency: 44, VRAM: 72},
	}
	c, err := NewFrontChart(front, ChartOptions{
		Title: "test", Throughput: "output_throughput", Latency: "tpot_p99", LatencyLimit: 50,
		Default: &ChartPoint{Throughput: 2000, Latency: 30, VRAM: 72},
		Others:  []ChartPoint{{Throughput: 900, Latency: 40, VRAM: 70}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, "svg"); err != nil {
		t.Fatal(err)
	}
	got := svgCircles(t, bytes.NewReader(buf.Bytes()))
	if len(got) != len(front) {
		t.Fatalf("%d circles in the SVG, want %d (the front)", len(got), len(front))
	}
	var want [][2]float64
	for _, q := range front {
		x, y, err := c.Pixel(q.Latency, q.Throughput)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, [2]float64{x, y})
	}
	sortPts(got)
	sortPts(want)
	for i := range got {
		// vgsvg writes 5 significant digits.
		if math.Abs(got[i][0]-want[i][0]) > 0.05 || math.Abs(got[i][1]-want[i][1]) > 0.05 {
			t.Errorf("circle %d at %v, want %v", i, got[i], want[i])
		}
	}
	if !strings.Contains(buf.String(), "vLLM default") || !strings.Contains(buf.String(), "SLO tpot_p99") {
		t.Error("legend lacks the default marker or the SLO line")
	}
	var png bytes.Buffer
	if err := c.Write(&png, "png"); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
		t.Fatalf("png: %v", err)
	}
	if err := c.Write(io.Discard, "gif"); err == nil {
		t.Error("gif accepted")
	}
}

func sortPts(p [][2]float64) {
	sort.Slice(p, func(i, j int) bool { return p[i][0] < p[j][0] })
}

func TestFrontChartEmpty(t *testing.T) {
	if _, err := NewFrontChart(nil, ChartOptions{}); err == nil {
		t.Fatal("empty chart accepted")
	}
}

func TestFrontHTML(t *testing.T) {
	front := []ChartPoint{{Label: "s-1", Throughput: 1200.5, Latency: 12.25, VRAM: 40}, {Label: "s-2", Throughput: 2500, Latency: 25, VRAM: 72}}
	var buf bytes.Buffer
	err := WriteFrontHTML(&buf, front, ChartOptions{Title: "t", Throughput: "output_throughput", Latency: "tpot_p99", LatencyLimit: 50,
		Default: &ChartPoint{Label: "default", Throughput: 2000, Latency: 30, VRAM: 72}})
	if err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{"<html", "echarts", `"Pareto front"`, `"vLLM default"`, `[12.25,1200.5,40]`, `[25,2500,72]`, `"s-1"`, `"xAxis":50`, "SLO tpot_p99 <= 50 ms"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
	if err := WriteFrontHTML(io.Discard, nil, ChartOptions{}); err == nil {
		t.Error("empty chart accepted")
	}
}
