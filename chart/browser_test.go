package chart

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/chart/charttest"
)

// TestChartsInBrowser opens every chart kind as WriteHTML writes it in
// headless Chromium at 1280 and 800 px (a screenshot of each): no request
// leaves the page's server, no console error, and each ECharts instance
// passes charttest.Check (legend = drawn series, markers in their legend's
// colour and symbol, no visual map, the chart fills its frame). On the
// front: default, recommended and front are three distinct markers, the
// SLO bound is in the legend, and hovering a point shows its config, flags
// and metrics. A page loading a script from elsewhere proves the network
// check catches it.
func TestChartsInBrowser(t *testing.T) {
	charttest.Find(t)
	dir := t.TempDir()
	for name, f := range allFigures() {
		out, err := os.Create(filepath.Join(dir, name+".html"))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteHTML(out, f); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	remote := `<!doctype html><html><head><link rel="icon" href="data:,"></head><body><script src="http://198.51.100.7/echarts.js"></script><p>remote</p></body></html>`
	if err := os.WriteFile(filepath.Join(dir, "remote.html"), []byte(remote), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer ts.Close()
	b := charttest.New(t, dir, ts.URL)

	b.Open(ts.URL+"/remote.html", 800, 600)
	b.Poll(`document.readyState === 'complete'`)
	if got := b.Blocked(); len(got) != 1 || !strings.Contains(got[0], "198.51.100.7") {
		t.Fatalf("a page loading a remote script: blocked %v; the check must catch it", got)
	}
	b.ConsoleErrors(nil) // the blocked load's own error

	shots := os.Getenv("TUNER_CHART_SHOTS")
	if shots == "" {
		shots = dir
	}
	for name := range allFigures() {
		for _, width := range []int64{1280, 800} {
			b.Open(ts.URL+"/"+name+".html", width, width*5/8)
			b.Poll(`!!window.echarts && !!document.querySelector('[_echarts_instance_]')`)
			b.Screenshot(shots, name+"-"+strconv.FormatInt(width, 10)+".png")
			in := b.Inspect(FrontName)
			if len(in) != 1 {
				t.Fatalf("%s at %d px: %d charts", name, width, len(in))
			}
			charttest.Check(t, in[0])
			if name == "front" {
				checkFront(t, in[0])
			}
			if bl := b.Blocked(); len(bl) > 0 {
				t.Errorf("%s: requests off the page's server: %v", name, bl)
			}
			if ce := b.ConsoleErrors(nil); len(ce) > 0 {
				t.Errorf("%s: console errors: %v", name, ce)
			}
		}
		// The chart follows a resize of its window.
		b.Resize(1000, 700)
		if in := b.Inspect(""); in[0].W != 1000 {
			t.Errorf("%s: %g px wide after a resize to 1000", name, in[0].W)
		}
	}
}

// checkFront: vLLM's default, the recommendation and the front are three
// distinct markers, each in the legend; the SLO bound too; the hover text
// names the config, its flags and metrics.
func checkFront(t *testing.T, in charttest.Instance) {
	t.Helper()
	marks := map[string]string{}
	for _, s := range in.Series {
		marks[s.Name] = s.Symbol + " " + strings.ToLower(s.Colour)
	}
	d, r, f := marks[DefaultName], marks[RecommendName], marks[FrontName]
	if d == "" || r == "" || f == "" || d == r || d == f || r == f {
		t.Errorf("front markers: default %q, recommended %q, front %q: want three distinct", d, r, f)
	}
	slo := false
	for _, e := range in.Legend {
		slo = slo || strings.HasPrefix(e.Name, "SLO ")
	}
	if !slo {
		t.Errorf("legend %v lacks the SLO bound", in.Legend)
	}
	for _, want := range []string{"config ", "--max-num-seqs", "tok/s", " ms", "peak VRAM"} {
		if !strings.Contains(in.Tooltip, want) {
			t.Errorf("hover text %q lacks %q", in.Tooltip, want)
		}
	}
}
