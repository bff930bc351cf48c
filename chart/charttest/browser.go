// Package charttest drives headless Chromium over pages that show charts:
// every request not to the page's own server is blocked and recorded,
// console errors are recorded, and each ECharts instance of the page (its
// frames included) can be read back and checked against its legend.
package charttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Find is the headless Chromium the tests drive. Outside CI a test skips
// when none is installed; in CI (CI=true) that is a failure.
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH (CI installs it)")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium)")
	return ""
}

// Browser is one headless Chromium tab whose network is limited to one
// origin.
type Browser struct {
	Ctx    context.Context
	t      testing.TB
	origin string // scheme://host:port allowed

	mu      sync.Mutex
	blocked []string
	console []chromedp.ConsoleMessage
}

// New starts Chromium (a new empty profile under dir, background
// networking off, no sandbox) allowing requests to origin only (and data:
// and about: URLs).
func New(t testing.TB, dir, origin string) *Browser {
	t.Helper()
	exe := Find(t)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1280, 900), chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("hide-scrollbars", true))
	t.Cleanup(cancelA)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(cancelC)
	b := &Browser{t: t, origin: origin}
	// The first Run starts the browser and must have no deadline; a hang
	// guard (not a speed assertion) bounds the steps after it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for e, err := range paused {
			if err != nil {
				return
			}
			if b.allowed(e.Request.URL) {
				_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
				continue
			}
			b.mu.Lock()
			b.blocked = append(b.blocked, e.Request.URL)
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
		}
	}()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() {
		for m, err := range chromedp.Console(cctx) {
			if err != nil {
				return
			}
			if m.Type == "error" || m.IsException() {
				b.mu.Lock()
				b.console = append(b.console, m)
				b.mu.Unlock()
			}
		}
	}()
	tctx, cancelT := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancelT)
	b.Ctx = tctx
	return b
}

func (b *Browser) allowed(raw string) bool {
	if strings.HasPrefix(raw, "data:") || strings.HasPrefix(raw, "about:") || strings.HasPrefix(raw, "blob:") {
		return true
	}
	u, err := url.Parse(raw)
	return err == nil && u.Scheme+"://"+u.Host == b.origin
}

// Blocked returns the requests refused so far and forgets them.
func (b *Browser) Blocked() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.blocked
	b.blocked = nil
	return out
}

// ConsoleErrors returns the console errors and exceptions so far, those
// allow accepts left out, and forgets them.
func (b *Browser) ConsoleErrors(allow func(chromedp.ConsoleMessage) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		if allow == nil || !allow(m) {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
		}
	}
	b.console = nil
	return out
}

// Open sets the viewport width (and height) and loads url.
func (b *Browser) Open(url string, width, height int64) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, chromedp.EmulateViewport(width, height), chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("open %s: %v", url, err)
	}
}

// Resize changes the viewport of the page shown.
func (b *Browser) Resize(width, height int64) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, chromedp.EmulateViewport(width, height), chromedp.Sleep(300*time.Millisecond)); err != nil {
		b.t.Fatal(err)
	}
}

// Poll waits until the JavaScript expression is true.
func (b *Browser) Poll(js string) {
	b.t.Helper()
	// A hang guard, not a speed assertion: charts are drawn by a server
	// sharing a busy machine.
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(3*time.Minute))); err != nil {
		b.t.Fatalf("waiting for %s: %v", js, err)
	}
}

// Eval evaluates a JavaScript expression into v's type.
func Eval[T any](b *Browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("%.200s: %v", js, err)
	}
	return v
}

// Screenshot saves the page as PNG to dir/name and returns its bytes.
func (b *Browser) Screenshot(dir, name string) []byte {
	b.t.Helper()
	// The charts' entry animation, for the picture only.
	if err := chromedp.Do(b.Ctx, chromedp.Sleep(700*time.Millisecond)); err != nil {
		b.t.Fatal(err)
	}
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return png
}

// Instance is one ECharts instance as the page drew it.
type Instance struct {
	Frame  string   `json:"frame"` // the frame's id ("" for the page itself)
	Legend []Entry  `json:"legend"`
	Series []Series `json:"series"`
	// VisualMaps counts visualMap components.
	VisualMaps int `json:"visualMap"`
	// W, H are the chart's size; WinW, WinH its window's (frame's).
	W, H, WinW, WinH float64
	// Outside lists drawn elements that cross the chart's edges.
	Outside []string `json:"outside"`
	Tooltip string   `json:"tooltip"` // the hover text of the first point of the first marked series
}

// Entry is a legend entry: its name and its icon ("" for the series').
type Entry struct {
	Name string `json:"name"`
	Icon string `json:"icon"`
}

// Series is a drawn series: its option and the visuals ECharts computed
// for it and for each of its data items.
type Series struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Symbol string   `json:"symbol"` // the series' visual symbol (what the legend shows)
	Colour string   `json:"colour"` // the series' visual colour (the legend's)
	Items  int      `json:"items"`
	Colors []string `json:"itemColours"` // distinct colours of its data items' markers
	Syms   []string `json:"itemSymbols"` // distinct symbols of its data items (none: hidden)
}

// inspectJS reads every ECharts instance of a window and of its frames.
const inspectJS = `(async (hover) => {
  const out = [];
  const visit = async (w, frame) => {
    if (!w.echarts) return;
    for (const el of w.document.querySelectorAll('[_echarts_instance_]')) {
      const inst = w.echarts.getInstanceByDom(el);
      if (!inst) continue;
      const o = inst.getOption();
      const legend = (o.legend || []).flatMap((l) => (l.data || []).map((d) => typeof d === 'string' ? { name: d, icon: '' } : { name: d.name, icon: d.icon || '' }));
      const series = [];
      inst.getModel().eachSeries((sm) => {
        const d = sm.getData();
        const st = d.getVisual('style') || {};
        const cols = new Set(), syms = new Set();
        for (let i = 0; i < d.count(); i++) {
          const s = d.getItemVisual(i, 'style') || {};
          cols.add(String(s.fill === '#fff' || s.fill === '#ffffff' || s.fill === 'none' ? s.stroke : s.fill));
          syms.add(String(d.getItemVisual(i, 'symbol')));
        }
        series.push({ name: sm.name || '', type: sm.subType, symbol: String(d.getVisual('symbol') || ''), colour: String(st.fill || st.stroke || ''),
          items: d.count(), itemColours: [...cols], itemSymbols: [...syms] });
      });
      const W = inst.getWidth(), H = inst.getHeight(), outside = [];
      inst.getZr().storage.getDisplayList(true).forEach((e) => {
        if (e.ignore || e.invisible || !e.getBoundingRect) return;
        // A text's spans report no font of their own: measure the text.
        const m = e.type === 'tspan' && e.parent && e.parent.getBoundingRect ? e.parent : e;
        const r = m.getBoundingRect().clone();
        if (m.transform) r.applyTransform(m.transform);
        if (!(r.width > 0 || r.height > 0)) return;
        // zrender measures a parallel axis' name with no font (a few px
        // high, placed off its anchor): no real text is under 6 px.
        if (m.type === 'text' || m.type === 'tspan') { if (r.height < 6) return; }
        if (r.x < -1 || r.y < -1 || r.x + r.width > W + 1 || r.y + r.height > H + 1) outside.push((e.type || '?') + ' ' + (e.style && e.style.text || '') + ' ' + JSON.stringify([r.x, r.y, r.width, r.height].map(Math.round)));
      });
      // Hover the first point of the first named scatter or line series.
      let tooltip = '';
      let idx = (o.series || []).findIndex((s) => s.name === hover);
      if (idx < 0) idx = (o.series || []).findIndex((s) => s.name && s.type !== 'parallel' && (s.data || []).some((p) => p && p.tip));
      if (idx >= 0 && o.series[idx].type !== 'parallel') {
        const di = o.series[idx].data.findIndex((p) => p && p.tip && p.symbol !== 'none');
        inst.dispatchAction({ type: 'showTip', seriesIndex: idx, dataIndex: di });
        await new Promise((r) => setTimeout(r, 200)); // the tooltip renders on the next frame
        const tips = [...w.document.querySelectorAll('div')].filter((x) => x.style && x.style.zIndex === '9999999');
        tooltip = tips.map((x) => x.innerText).join(' ');
        inst.dispatchAction({ type: 'hideTip' });
      }
      out.push({ frame, legend, series, visualMap: (o.visualMap || []).length, W, H, WinW: w.innerWidth, WinH: w.innerHeight, outside, tooltip });
    }
  };
  await visit(window, '');
  for (const f of document.querySelectorAll('iframe')) {
    if (!f.hidden && f.contentWindow && f.offsetWidth > 0) await visit(f.contentWindow, f.id);
  }
  return JSON.stringify(out);
})`

// Inspect reads every ECharts instance of the page and its frames,
// hovering the first point of the series named hover (or of the first
// series with hover texts).
func (b *Browser) Inspect(hover string) []Instance {
	b.t.Helper()
	h, _ := json.Marshal(hover)
	var out []Instance
	js, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](inspectJS+"("+string(h)+")", chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("inspect charts: %v", err)
	}
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// Check asserts what every chart must hold: the legend lists exactly the
// named series, each series' markers have its colour and symbol (a marker
// hidden under another series' is "none"), a scatter's legend icon is its
// symbol, no visual map, and the chart fills its window with nothing drawn
// past its edges.
func Check(t testing.TB, in Instance) {
	t.Helper()
	where := in.Frame
	if where == "" {
		where = "page"
	}
	if in.VisualMaps > 0 {
		t.Errorf("%s: %d visual maps", where, in.VisualMaps)
	}
	names := map[string]Series{}
	for _, s := range in.Series {
		if s.Name != "" {
			names[s.Name] = s
		}
	}
	seen := map[string]bool{}
	for _, e := range in.Legend {
		s, ok := names[e.Name]
		if !ok {
			t.Errorf("%s: legend entry %q draws no series", where, e.Name)
			continue
		}
		seen[e.Name] = true
		if s.Type == "scatter" && e.Icon != "" && e.Icon != s.Symbol {
			t.Errorf("%s: legend icon of %q is %q, its markers %q", where, e.Name, e.Icon, s.Symbol)
		}
	}
	for n := range names {
		if !seen[n] {
			t.Errorf("%s: series %q is not in the legend", where, n)
		}
	}
	for _, s := range in.Series {
		if s.Type == "parallel" {
			continue
		}
		for _, c := range s.Colors {
			if !strings.EqualFold(c, s.Colour) && c != "undefined" {
				t.Errorf("%s: a marker of %q is %s, its legend %s", where, s.Name, c, s.Colour)
			}
		}
		for _, sym := range s.Syms {
			if s.Type != "bar" && sym != s.Symbol && sym != "none" {
				t.Errorf("%s: a marker of %q is a %s, its legend a %s", where, s.Name, sym, s.Symbol)
			}
		}
	}
	if in.W < in.WinW-2 || in.W > in.WinW+1 || in.H < in.WinH-2 || in.H > in.WinH+1 {
		t.Errorf("%s: chart %gx%g in a %gx%g window: it does not fill its frame", where, in.W, in.H, in.WinW, in.WinH)
	}
	if len(in.Outside) > 0 {
		t.Errorf("%s: drawn past the chart's edges: %v", where, in.Outside)
	}
}
