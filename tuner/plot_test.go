package tuner

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
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
		Default:     &ChartPoint{Throughput: 2000, Latency: 30, VRAM: 72},
		Recommended: &front[2],
		Others:      []ChartPoint{{Throughput: 900, Latency: 40, VRAM: 70}},
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
	for _, want := range []string{"vLLM default", "SLO tpot_p99 &lt;= 50 ms<", "Pareto front<", "recommended<", "output_throughput (tok/s)", "other configs"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
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

// TestFrontChartZoomsToData: an SLO bound far beyond the points does not
// stretch the axis (all points in 10% of the width, as before); it is drawn
// at the edge and the legend says so. The VRAM legend says "estimated".
func TestFrontChartZoomsToData(t *testing.T) {
	front := []ChartPoint{{Throughput: 1200, Latency: 12, VRAM: 40}, {Throughput: 2500, Latency: 25, VRAM: 72}}
	c, err := NewFrontChart(front, ChartOptions{Title: "t", Throughput: "output_throughput", Latency: "tpot_p99",
		LatencyLimit: 500, ThroughputLimit: 100, VRAMEstimated: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Plot.X.Max > 30 || c.Plot.Y.Min < 1000 {
		t.Fatalf("axes x [%g, %g] y [%g, %g]: not zoomed to the points", c.Plot.X.Min, c.Plot.X.Max, c.Plot.Y.Min, c.Plot.Y.Max)
	}
	x0, _, _ := c.Pixel(12, 1200)
	x1, _, _ := c.Pixel(25, 2500)
	xl, _, _ := c.Pixel(c.Plot.X.Min, 0)
	xr, _, _ := c.Pixel(c.Plot.X.Max, 0)
	if (x1-x0)/(xr-xl) < 0.8 {
		t.Fatalf("points span %.0f%% of the width", 100*(x1-x0)/(xr-xl))
	}
	var buf bytes.Buffer
	if err := c.Write(&buf, "svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SLO tpot_p99 &lt;= 500 ms (beyond the right edge)", "SLO output_throughput &gt;= 100 (beyond the bottom edge)", "peak VRAM (estimated)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
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
	for _, want := range []string{"<html", "echarts", `"Pareto front"`, `"vLLM default"`, `[12.25,1200.5,40]`, `[25,2500,72]`, `"s-1"`, `"xAxis":50`, "SLO tpot_p99 <= 50 ms",
		"output_throughput (tok/s)", "Licensed to the Apache Software Foundation"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
	// Self-contained: no script from elsewhere; the inlined one is whole.
	if strings.Contains(html, "<script src=") || strings.Contains(html, "go-echarts-assets") {
		t.Error("HTML loads a script from a host")
	}
	if strings.Contains(echartsJS, "</script") || len(echartsJS) < 900_000 {
		t.Errorf("bundled ECharts: %d bytes, contains </script: %v", len(echartsJS), strings.Contains(echartsJS, "</script"))
	}
	// A far bound does not stretch the axes; the subtitle names it.
	buf.Reset()
	if err := WriteFrontHTML(&buf, front, ChartOptions{Title: "t", Throughput: "output_throughput", Latency: "tpot_p99", LatencyLimit: 500}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "SLO tpot_p99 \u003c= 500 ms (beyond the right edge)") || strings.Contains(buf.String(), `"max":500`) {
		t.Error("HTML: a far SLO bound stretched the axis or is not named")
	}
	if err := WriteFrontHTML(io.Discard, nil, ChartOptions{}); err == nil {
		t.Error("empty chart accepted")
	}
}

// TestFrontHTMLRendersOffline opens the page in headless Chromium with
// every host name unresolvable (an offline GPU machine) and checks the
// screenshot for the coloured markers ECharts draws: a page that loads
// ECharts from a CDN stays white there. Outside CI the test skips when no
// browser is installed; in CI (CI=true) that is a failure.
func TestFrontHTMLRendersOffline(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium on PATH (CI installs it: .ci/run)")
		}
		t.Skip("no Chromium on PATH (apt-get install chromium)")
	}
	dir := t.TempDir()
	page, shot := filepath.Join(dir, "front.html"), filepath.Join(dir, "shot.png")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	front := []ChartPoint{{Label: "a", Throughput: 1200, Latency: 12, VRAM: 40}, {Label: "b", Throughput: 2500, Latency: 25, VRAM: 72}, {Label: "c", Throughput: 3100, Latency: 44, VRAM: 72}}
	err = WriteFrontHTML(f, front, ChartOptions{Title: "offline", Throughput: "output_throughput", Latency: "tpot_p99", LatencyLimit: 50})
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1200,750", "--virtual-time-budget=5000",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, out)
	}
	pf, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	// Saturated pixels: the markers and the VRAM scale (white, black and
	// grey text have none).
	coloured := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if max(r, g, bl)-min(r, g, bl) > 0x5000 {
				coloured++
			}
		}
	}
	if coloured < 1000 {
		t.Fatalf("screenshot has %d coloured pixels: the chart did not render offline", coloured)
	}
}
