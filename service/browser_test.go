package service

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vllm-tuner/tuner/chart/charttest"
)

// findBrowser is the headless Chromium the test drives (skips outside CI
// when none is installed; a failure in CI).
func findBrowser(t *testing.T) string { return charttest.Find(t) }

// newBrowser starts headless Chromium with its profile under dir (only
// loopback resolves) and returns its context and two helpers: text
// evaluates a JavaScript expression to a string, poll waits until one is
// true.
func newBrowser(t *testing.T, browser, dir string) (context.Context, func(string) string, func(string)) {
	t.Helper()
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1100), chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
	t.Cleanup(cancelA)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(cancelC)
	// The first Run starts the browser and must have no deadline; a hang
	// guard (not a speed assertion) bounds the steps after it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	text := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	poll := func(js string) {
		t.Helper()
		// No per-poll timeout (chromedp's default is 30 s, a speed
		// assumption that failed under make test-stress): the hang guard
		// on ctx bounds it.
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(0))); err != nil {
			t.Fatalf("waiting for %s: %v", js, err)
		}
	}
	return ctx, text, poll
}

// TestDashboardInBrowser drives the real page in headless Chromium: queue a
// sim-virtual search from the form, watch its progress arrive over SSE,
// open the study, check the front chart draws one point per front member,
// copy the recommended command, and save a screenshot (also to
// $TUNER_SCREENSHOT when set, for the README).
func TestDashboardInBrowser(t *testing.T) {
	browser := findBrowser(t)
	// With a token and no public reads: every call of the page, the event
	// stream and the chart included, must carry it.
	const token = "s3cret-t0ken"
	e := newEnv(t, "", Config{Token: token}, true)
	dir := t.TempDir()
	ctx, text, poll := newBrowser(t, browser, dir)
	err := chromedp.Do(ctx,
		chromedp.Navigate(e.ts.URL+"/"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`(localStorage.setItem("tuner-token", "`+token+`"), true)`)(ctx, tg)
			return err
		}),
		chromedp.Navigate(e.ts.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#jobform`)),
		chromedp.SetValue(chromedp.CSS(`input[name=model]`), testModel),
		chromedp.SetValue(chromedp.CSS(`input[name=gpu]`), testGPU),
		chromedp.SetValue(chromedp.CSS(`select[name=engine]`), "sim-virtual"),
		chromedp.SetValue(chromedp.CSS(`input[name=trials]`), "5"),
		chromedp.SetValue(chromedp.CSS(`input[name=requests]`), "40"),
		chromedp.Click(chromedp.CSS(`#queue`)),
	)
	if err != nil {
		t.Fatalf("queue from the form: %v", err)
	}
	// The progress cell is filled from the event stream only (the search
	// is quick: the page may first show it in the re-measurement phase).
	poll(`(() => { const c = document.querySelector('#jobs tbody tr td.progress'); return !!c && /(trial [1-5]\/5|re-measurement [0-9]+\/[0-9]+) · /.test(c.textContent); })()`)
	poll(`(() => { const c = document.querySelector('#jobs tbody tr td:nth-child(2)'); return !!c && c.textContent === 'done'; })()`)
	if p := text(`document.querySelector('#jobs tbody tr td.progress').textContent`); !regexp.MustCompile(`^re-measurement (\d+)/(\d+) · \d+s elapsed`).MatchString(p) {
		t.Fatalf("progress %q; want the last re-measurement with its elapsed time", p)
	}
	js, err := e.st.Jobs(context.Background())
	if err != nil || len(js) != 1 || js[0].Study == "" {
		t.Fatalf("jobs %+v %v", js, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#jobs tbody tr a`)), chromedp.WaitVisible(chromedp.CSS(`#reccmd`))); err != nil {
		t.Fatalf("open the study: %v", err)
	}
	poll(`(() => { const w = document.querySelector('#front').contentWindow; if (!w || !w.echarts) return false;
		const el = w.document.querySelector('[_echarts_instance_]'); return !!(el && w.echarts.getInstanceByDom(el)); })()`)
	points, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const w = document.querySelector('#front').contentWindow;
		const inst = w.echarts.getInstanceByDom(w.document.querySelector('[_echarts_instance_]'));
		return inst.getOption().series.filter((s) => s.name === 'Pareto front' || s.name === 'on the front by VRAM only')
			.reduce((n, s) => n + s.data.length, 0); })()`))
	if err != nil {
		t.Fatal(err)
	}
	frontSize, err := chromedp.Run(ctx, chromedp.Evaluate[int](`+document.querySelector('#front').dataset.frontSize`))
	if err != nil {
		t.Fatal(err)
	}
	cmd := text(`document.querySelector('#reccmd').textContent`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rec button.copy`))); err != nil {
		t.Fatal(err)
	}
	poll(`!!window.lastCopied`)
	copied := text(`window.lastCopied`)
	if err := chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond)); err != nil { // the chart's entry animation, for the screenshot only (quality 100: PNG)
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	code, out := e.do(t, "GET", "/api/v1/studies/"+js[0].Study+"/front", token, "")
	if code != 200 {
		t.Fatalf("front: %d %s", code, out)
	}
	if want := strings.Count(out, `"config_id"`); points != want || frontSize != want || points == 0 {
		t.Fatalf("chart has %d front points, page says %d, API front has %d members", points, frontSize, want)
	}
	if !strings.HasPrefix(cmd, "vllm serve "+testModel) || copied != cmd {
		t.Fatalf("copied %q; shown command %q", copied, cmd)
	}
	// The page's verdict is the API's, word for word (issue 26: the page
	// showed a gain where the API said it was not significant).
	code, out = e.do(t, "GET", "/api/v1/studies/"+js[0].Study+"/recommend", token, "")
	var rec struct {
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out), &rec); code != 200 || err != nil || rec.Verdict == "" {
		t.Fatalf("recommend: %d %v %s", code, err, out)
	}
	if shown := text(`document.querySelector('#verdict').textContent`); shown != "verdict: "+rec.Verdict {
		t.Fatalf("page shows %q, the API's verdict is %q", shown, rec.Verdict)
	}
	p := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("TUNER_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s (%d bytes)", p, len(shot))
}
