package service

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/vllm-tuner/tuner/store"
)

// TestSchedulesInBrowser drives the Schedules page in headless Chromium:
// add a nightly benchmark schedule through the form, see it listed with its
// next run, edit its cron expression, see a bad expression refused with the
// parser's message, pause it, edit it again (it stays paused), and open its
// history page; each step is
// checked in the store too. A screenshot is saved (also to
// $TUNER_SCHEDULE_SCREENSHOT when set). On a bbolt file and on PostgreSQL.
func TestSchedulesInBrowser(t *testing.T) {
	browser := findBrowser(t)
	onEachBackend(t, func(t *testing.T, db store.DB) { schedulesInBrowser(t, browser, db) })
}

func schedulesInBrowser(t *testing.T, browser string, db store.DB) {
	e, _ := serveDB(t, db, newFakeClock(at(1, 1)), Config{}, false, true)
	dir := t.TempDir()
	ctx, text, poll := newBrowser(t, browser, dir)
	fill := func(v map[string]string) {
		t.Helper()
		b, _ := json.Marshal(v)
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const f = document.querySelector('#schedform'); const v = `+string(b)+`;
			for (const [k, x] of Object.entries(v)) { f.elements[k].value = x; f.elements[k].dispatchEvent(new Event('change')); } return true; })()`))
		if err == nil {
			err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#savesched`)))
		}
		if err != nil {
			t.Fatalf("submit the form: %v", err)
		}
	}
	stored := func() scheduleView {
		t.Helper()
		list, err := db.Schedules(context.Background())
		if err != nil || len(list) != 1 {
			t.Fatalf("stored schedules %+v, %v; want one", list, err)
		}
		return scheduleView{Schedule: list[0]}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(e.ts.URL+"/#/schedules"), chromedp.WaitVisible(chromedp.CSS(`#schedform`))); err != nil {
		t.Fatal(err)
	}
	fill(map[string]string{"name": "nightly", "cron": "0 2 * * *", "kind": "bench", "tier": "smoke", "model": testModel, "engine": "sim-virtual", "config": "default"})
	poll(`document.querySelectorAll('#schedlist tbody tr').length === 1`)
	if row := text(`document.querySelector('#schedlist tbody tr').textContent`); !strings.Contains(row, "nightly") || !strings.Contains(row, "smoke benchmark") ||
		!strings.Contains(row, "2026-03-01 02:00") {
		t.Fatalf("listed schedule %q: want its name, tier and next run", row)
	}
	if sc := stored(); sc.Cron != "0 2 * * *" || !strings.Contains(string(sc.Job), `"tier":"smoke"`) || !sc.CatchUp {
		t.Fatalf("stored schedule %+v (job %s)", sc.Schedule, sc.Job)
	}

	// Edit: the form fills with the schedule; saving replaces it.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#schedlist tbody tr button.edit`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelector('#schedform').elements.name.value === 'nightly' && document.querySelector('#savesched').textContent === 'Save schedule'`)
	fill(map[string]string{"cron": "bad"})
	poll(`document.querySelector('#schederr').textContent !== ''`)
	if msg := text(`document.querySelector('#schederr').textContent`); !strings.Contains(msg, `cron "bad"`) || !strings.Contains(msg, "expected exactly 5 fields") {
		t.Fatalf("a bad cron expression: %q", msg)
	}
	fill(map[string]string{"cron": "30 3 * * *"})
	poll(`document.querySelector('#schedlist tbody tr code').textContent === '30 3 * * *'`)
	if next := text(`document.querySelector('#schedlist tbody tr td.next').textContent`); next != "2026-03-01 03:30" {
		t.Fatalf("next run after the edit %q", next)
	}
	if sc := stored(); sc.Cron != "30 3 * * *" || !sc.NextFire.Equal(at(1, 3).Add(30*60e9)) {
		t.Fatalf("stored after the edit %+v", sc.Schedule)
	}

	// Pause.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#schedlist tbody tr button.pause`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelector('#schedlist tbody tr td.next').textContent === 'paused' && document.querySelector('#schedlist tbody tr button.pause').textContent === 'resume'`)
	if sc := stored(); !sc.Paused || !sc.NextFire.IsZero() {
		t.Fatalf("stored after pause %+v", sc.Schedule)
	}
	// An edit of a paused schedule keeps it paused.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#schedlist tbody tr button.edit`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelector('#savesched').textContent === 'Save schedule'`)
	fill(map[string]string{"cron": "15 4 * * *"})
	poll(`document.querySelector('#schedlist tbody tr code').textContent === '15 4 * * *'`)
	if next := text(`document.querySelector('#schedlist tbody tr td.next').textContent`); next != "paused" {
		t.Fatalf("next run after editing a paused schedule %q", next)
	}
	if sc := stored(); !sc.Paused || sc.Cron != "15 4 * * *" {
		t.Fatalf("stored after editing a paused schedule %+v", sc.Schedule)
	}
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}

	// Its history page: no run yet, said instead of a chart.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#schedlist tbody tr a`))); err != nil {
		t.Fatal(err)
	}
	poll(`!document.querySelector('#schedule').hidden && !document.querySelector('#trendmsg').hidden`)
	if title, msg := text(`document.querySelector('#schedtitle').textContent`), text(`document.querySelector('#trendmsg').textContent`); !strings.Contains(title, "nightly") ||
		!strings.Contains(title, "paused") || !strings.Contains(msg, "no finished run") {
		t.Fatalf("schedule page %q, trend note %q", title, msg)
	}
	for _, p := range []string{filepath.Join(dir, "schedules.png"), os.Getenv("TUNER_SCHEDULE_SCREENSHOT")} {
		if p != "" {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
