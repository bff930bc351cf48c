package service

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBenchmarksInBrowser drives the Benchmarks pages in headless
// Chromium: queue two small sim-virtual benchmarks from the form (the
// second on a 40% slower simulator), watch them finish, open a run's report
// (cells x metrics with units and the curve of `tuner bench plot`), compare
// the two runs from the compare form and check the verdict table marks the
// TPOT regression; a screenshot of each page is saved (also to
// $TUNER_BENCH_SCREENSHOT, and with -compare and -list before its
// extension, for the README).
func TestBenchmarksInBrowser(t *testing.T) {
	browser := findBrowser(t)
	e := newEnv(t, "", Config{}, true)
	dir := t.TempDir()
	ctx, text, poll := newBrowser(t, browser, dir)
	shot := func(name string) []byte {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return b
	}
	matrix := fmt.Sprintf(testMatrix, 60)
	queue := func(labels, args string, n int) {
		t.Helper()
		// Fill the form as a user would, then click the button.
		fill, _ := json.Marshal(map[string]string{"model": testModel, "gpu": testGPU, "engine": "sim-virtual", "config": "default",
			"tier": "", "matrix_yaml": matrix, "labels": labels, "engine_args": args})
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const f = document.querySelector('#benchform'); const v = `+string(fill)+`;
			for (const [k, x] of Object.entries(v)) { f.elements[k].value = x; f.elements[k].dispatchEvent(new Event('change')); } return true; })()`))
		if err == nil {
			err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#queuebench`)))
		}
		if err != nil {
			t.Fatalf("queue from the form: %v", err)
		}
		// The job's row turns done; its run is linked.
		poll(`(() => { const rows = document.querySelectorAll('#benchjobs tbody tr');
			return rows.length === ` + strconv.Itoa(n) + ` && rows[0].querySelector('td.state').textContent === 'done' && !!rows[0].querySelector('a[href^="#/run/"]'); })()`)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(e.ts.URL+"/#/bench"), chromedp.WaitVisible(chromedp.CSS(`#benchform`))); err != nil {
		t.Fatal(err)
	}
	queue("git=a", "", 1)
	queue("git=b", "--slowdown=1.4", 2)
	if bad := text(`document.querySelector('#bencherr').textContent`); bad != "" {
		t.Fatalf("form error %q", bad)
	}
	poll(`document.querySelectorAll('#runs tbody tr').length === 2`)
	list := shot("benchmarks.png")

	// The newest run's report.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#runs tbody tr:first-child a`))); err != nil {
		t.Fatal(err)
	}
	poll(`!!document.querySelector('#runcells table.report tbody tr') && !!document.querySelector('#runplot svg')`)
	if h := text(`document.querySelector('#runcells table.report thead').textContent`); !strings.Contains(h, "TPOT p50 (ms)") || !strings.Contains(h, "out tok/s") {
		t.Fatalf("report header %q: want metrics with units", h)
	}
	if row := text(`document.querySelector('#runcells table.report tbody tr').textContent`); !strings.Contains(row, "c=4") {
		t.Fatalf("report row %q: want the load c=4", row)
	}
	if l := text(`document.querySelector('#runmeta').textContent`); !strings.Contains(l, "git=b") || !strings.Contains(l, "--slowdown=1.4") {
		t.Fatalf("run labels and command %q", l)
	}
	shot("run.png")

	// Compare: the form defaults to base = the older, new = the newer run.
	if err := chromedp.Do(ctx, chromedp.Navigate(e.ts.URL+"/#/bench"), chromedp.WaitVisible(chromedp.CSS(`#compareform`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelector('#cmpnew').options.length === 2`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#compare`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelectorAll('#cmprows tbody tr').length > 0 || document.querySelector('#cmperr').textContent !== ''`)
	if errText := text(`document.querySelector('#cmperr').textContent`); errText != "" {
		t.Fatalf("compare error %q at %s", errText, text(`location.hash`))
	}
	verdict := text(`document.querySelector('#cmpverdict').textContent`)
	regressed := text(`[...document.querySelectorAll('#cmprows tbody tr.regression td:nth-child(2)')].map((td) => td.textContent).join(',')`)
	if !strings.HasPrefix(verdict, "Regression:") || !strings.Contains(regressed, "tpot_p50") {
		t.Fatalf("verdict %q, regressed rows %q; want a TPOT regression", verdict, regressed)
	}
	b := shot("compare.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#cmpmd`))); err != nil {
		t.Fatal(err)
	}
	poll(`!!window.lastCopied`)
	if md := text(`window.lastCopied`); !strings.HasPrefix(md, "### Benchmark comparison: Regression") {
		t.Fatalf("copied Markdown %q", md)
	}
	if out := os.Getenv("TUNER_BENCH_SCREENSHOT"); out != "" {
		ext := filepath.Ext(out)
		for name, data := range map[string][]byte{out: mustRead(t, filepath.Join(dir, "run.png")), strings.TrimSuffix(out, ext) + "-compare" + ext: b,
			strings.TrimSuffix(out, ext) + "-list" + ext: list} {
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
