package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
)

// testSchedules: create, list, get, edit (the fire record kept), fire with
// and without a job (the slot checked, the job queued in the same write),
// the history, survival across a reopen, pause, and delete.
func testSchedules(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := open()
	if ss, err := b.Schedules(ctx); err != nil || len(ss) != 0 {
		t.Fatalf("schedules of a new database: %v, %v", ss, err)
	}
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	body := json.RawMessage(`{"kind":"bench","tier":"nightly"}`)
	nightly, err := b.AddSchedule(ctx, store.Schedule{Name: "nightly", Cron: "0 2 * * *", Job: body, CatchUp: true, NextFire: t0})
	if err != nil {
		t.Fatal(err)
	}
	if nightly.ID != "sched-1" || nightly.Seq != 1 || nightly.V != store.RecordVersion || nightly.Created.IsZero() || !nightly.NextFire.Equal(t0) {
		t.Fatalf("added schedule: %+v", nightly)
	}
	smoke, err := b.AddSchedule(ctx, store.Schedule{Name: "smoke", Cron: "@hourly", Job: json.RawMessage(`{"kind":"search"}`), NextFire: t0.Add(-time.Hour)})
	if err != nil || smoke.ID != "sched-2" {
		t.Fatalf("second schedule: %+v, %v", smoke, err)
	}
	if _, err := b.AddSchedule(ctx, store.Schedule{Name: "nightly", Cron: "@daily", Job: body}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second schedule named nightly: %v, want ErrExists", err)
	}
	got, err := b.Schedule(ctx, nightly.ID)
	if err != nil || !sameJSON(t, got, nightly) {
		t.Fatalf("schedule %s: %+v, %v; want %+v", nightly.ID, got, err, nightly)
	}

	// A firing queues its job with the schedule's tag, in the same write.
	f, err := b.FireSchedule(ctx, nightly.ID, store.ScheduleFire{Slot: t0, Time: t0.Add(time.Second), Outcome: store.FireQueued},
		t0.Add(24*time.Hour), &store.Job{Kind: "bench", Spec: body, State: store.JobQueued, GPUSet: -1})
	if err != nil {
		t.Fatal(err)
	}
	if f.Seq != 1 || f.Schedule != nightly.ID || f.Job == "" || f.Outcome != store.FireQueued {
		t.Fatalf("fire: %+v", f)
	}
	j, err := b.Job(ctx, f.Job)
	if err != nil || j.Schedule != nightly.ID || j.Kind != "bench" || j.State != store.JobQueued {
		t.Fatalf("the fired job: %+v, %v", j, err)
	}
	// The same slot again (another service fired it): nothing written.
	if _, err := b.FireSchedule(ctx, nightly.ID, store.ScheduleFire{Slot: t0, Time: t0.Add(2 * time.Second), Outcome: store.FireQueued},
		t0.Add(24*time.Hour), &store.Job{Kind: "bench", Spec: body, State: store.JobQueued}); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("firing a slot twice: %v, want ErrClaimed", err)
	}
	if js, err := b.Jobs(ctx); err != nil || len(js) != 1 {
		t.Fatalf("jobs after a refused firing: %d, %v; want 1", len(js), err)
	}
	// A skipped firing queues nothing and keeps the last job.
	t1 := t0.Add(24 * time.Hour)
	if _, err := b.FireSchedule(ctx, nightly.ID, store.ScheduleFire{Slot: t1, Time: t1, Outcome: store.FireSkipped, Reason: "busy"}, t1.Add(24*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	got, err = b.Schedule(ctx, nightly.ID)
	if err != nil || got.LastJob != f.Job || !got.LastFire.Equal(t1) || !got.NextFire.Equal(t1.Add(24*time.Hour)) || got.Fires != 2 {
		t.Fatalf("schedule after two firings: %+v, %v", got, err)
	}

	// An edit keeps the fire record, whatever the edit carries.
	edit := got
	edit.Cron, edit.Paused, edit.NextFire, edit.LastJob, edit.Fires, edit.LastFire = "30 3 * * *", true, time.Time{}, "", 0, time.Time{}
	edited, err := b.UpdateSchedule(ctx, edit)
	if err != nil || edited.Cron != "30 3 * * *" || !edited.Paused || !edited.NextFire.IsZero() || edited.LastJob != f.Job || edited.Fires != 2 || !edited.LastFire.Equal(t1) {
		t.Fatalf("edited schedule: %+v, %v", edited, err)
	}
	edit.Name = "smoke"
	if _, err := b.UpdateSchedule(ctx, edit); !errors.Is(err, store.ErrExists) {
		t.Fatalf("renaming to a name in use: %v, want ErrExists", err)
	}
	// A paused schedule does not fire.
	if _, err := b.FireSchedule(ctx, nightly.ID, store.ScheduleFire{Slot: time.Time{}, Time: t1, Outcome: store.FireSkipped}, t1, nil); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("firing a paused schedule: %v, want ErrClaimed", err)
	}
	if _, err := b.FireSchedule(ctx, smoke.ID, store.ScheduleFire{Slot: smoke.NextFire, Time: t0, Outcome: store.FireMissed, CatchUp: true}, t0.Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}

	// Everything survives a reopen.
	b.Close()
	b = openOne(t, open)
	all, err := b.Schedules(ctx)
	if err != nil || len(all) != 2 || all[0].ID != nightly.ID || all[1].ID != smoke.ID || !sameJSON(t, all[0], edited) {
		t.Fatalf("schedules after reopen: %+v, %v", all, err)
	}
	fires, err := b.ScheduleFires(ctx, nightly.ID, 0)
	if err != nil || len(fires) != 2 || fires[0].Seq != 1 || fires[0].Job != f.Job || fires[1].Outcome != store.FireSkipped || fires[1].Reason != "busy" {
		t.Fatalf("history: %+v, %v", fires, err)
	}
	if last, err := b.ScheduleFires(ctx, nightly.ID, 1); err != nil || len(last) != 1 || last[0].Seq != 2 {
		t.Fatalf("last firing: %+v, %v", last, err)
	}
	if sf, err := b.ScheduleFires(ctx, smoke.ID, 5); err != nil || len(sf) != 1 || !sf[0].CatchUp || sf[0].Outcome != store.FireMissed {
		t.Fatalf("the other schedule's history: %+v, %v", sf, err)
	}

	// Delete: the schedule and its history go, its job stays.
	if err := b.DeleteSchedule(ctx, nightly.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Schedule(ctx, nightly.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted schedule: %v, want ErrNotFound", err)
	}
	if _, err := b.ScheduleFires(ctx, nightly.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted schedule's history: %v, want ErrNotFound", err)
	}
	if err := b.DeleteSchedule(ctx, nightly.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := b.Job(ctx, f.Job); err != nil {
		t.Fatalf("the deleted schedule's job: %v", err)
	}
	if sf, err := b.ScheduleFires(ctx, smoke.ID, 0); err != nil || len(sf) != 1 {
		t.Fatalf("the other schedule's history after the delete: %+v, %v", sf, err)
	}
	// The name is free again.
	if again, err := b.AddSchedule(ctx, store.Schedule{Name: "nightly", Cron: "@daily", Job: body}); err != nil || again.ID != "sched-3" {
		t.Fatalf("re-adding nightly: %+v, %v", again, err)
	}
	for _, id := range []string{"sched-9", "sched-x", "sched-01", "sched-0", "", "job-1"} {
		if _, err := b.Schedule(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("schedule %q: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := b.UpdateSchedule(ctx, store.Schedule{ID: "sched-9", Name: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing schedule: %v, want ErrNotFound", err)
	}
}

// testImportJobsSchedules: a job and a schedule copied from another
// database keep their IDs, records and firing history; new ones are
// numbered after them; a taken ID or name, or a record whose ID and number
// disagree, is refused and nothing is written; an imported schedule fires
// on from its history.
func testImportJobsSchedules(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	job := store.Job{V: store.RecordVersion, ID: "job-3", Seq: 3, Kind: "bench", Spec: json.RawMessage(`{"tier":"smoke"}`),
		State: store.JobDone, GPUSet: 1, Created: t0, Started: t0.Add(time.Second), Ended: t0.Add(time.Minute), Runs: 1,
		BenchRuns: []string{"r4"}, Schedule: "sched-5", Gates: []store.JobGate{{Run: "r4", Base: "r2", Verdict: "pass"}}}
	if err := b.ImportJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Job(ctx, job.ID); err != nil || !sameJSON(t, got, job) {
		t.Fatalf("imported job: %+v, %v; want %+v", got, err, job)
	}
	if err := b.ImportJob(ctx, job); !errors.Is(err, store.ErrExists) {
		t.Fatalf("importing job-3 twice: %v, want ErrExists", err)
	}
	bad := job
	bad.ID = "job-4"
	if err := b.ImportJob(ctx, bad); err == nil {
		t.Fatal("a job whose ID and number disagree was imported")
	}
	if next, err := b.AddJob(ctx, store.Job{Kind: "search", State: store.JobQueued}); err != nil || next.ID != "job-4" {
		t.Fatalf("job added after job-3 was imported: %+v, %v; want job-4", next, err)
	}

	sc := store.Schedule{V: store.RecordVersion, ID: "sched-5", Seq: 5, Name: "nightly", Cron: "0 2 * * *",
		Job: json.RawMessage(`{"kind":"bench"}`), CatchUp: true, Created: t0, Updated: t0,
		NextFire: t0.Add(48 * time.Hour), LastFire: t0.Add(24 * time.Hour), LastJob: job.ID, Fires: 2}
	fires := []store.ScheduleFire{
		{Schedule: sc.ID, Seq: 1, Slot: t0, Time: t0, Outcome: store.FireQueued, Job: job.ID},
		{Schedule: sc.ID, Seq: 2, Slot: t0.Add(24 * time.Hour), Time: t0.Add(24 * time.Hour), Outcome: store.FireSkipped, Reason: "busy"},
	}
	misnumbered := sc
	misnumbered.Seq = 4
	for name, tc := range map[string]struct {
		s     store.Schedule
		fires []store.ScheduleFire
	}{
		"another schedule's firing": {sc, []store.ScheduleFire{fires[0], {Schedule: "sched-1", Seq: 2}}},
		"firings out of order":      {sc, []store.ScheduleFire{fires[1], fires[0]}},
		"ID and number disagree":    {misnumbered, fires},
	} {
		if err := b.ImportSchedule(ctx, tc.s, tc.fires); err == nil {
			t.Errorf("schedule with %s imported", name)
		}
	}
	if err := b.ImportSchedule(ctx, sc, fires); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Schedule(ctx, sc.ID); err != nil || !sameJSON(t, got, sc) {
		t.Fatalf("imported schedule: %+v, %v; want %+v", got, err, sc)
	}
	if got, err := b.ScheduleFires(ctx, sc.ID, 0); err != nil || !sameJSON(t, got, fires) {
		t.Fatalf("imported history: %+v, %v; want %+v", got, err, fires)
	}
	if err := b.ImportSchedule(ctx, sc, nil); !errors.Is(err, store.ErrExists) {
		t.Fatalf("importing sched-5 twice: %v, want ErrExists", err)
	}
	other := sc
	other.ID, other.Seq = "sched-7", 7
	if err := b.ImportSchedule(ctx, other, nil); !errors.Is(err, store.ErrExists) {
		t.Fatalf("importing a second schedule named nightly: %v, want ErrExists", err)
	}
	if _, err := b.Schedule(ctx, other.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused schedule: %v, want ErrNotFound", err)
	}
	added, err := b.AddSchedule(ctx, store.Schedule{Name: "weekly", Cron: "@weekly", Job: sc.Job})
	if err != nil || added.ID != "sched-6" {
		t.Fatalf("schedule added after sched-5 was imported: %+v, %v; want sched-6", added, err)
	}
	// The imported schedule fires on: its third firing, a job numbered after job-4.
	f, err := b.FireSchedule(ctx, sc.ID, store.ScheduleFire{Slot: sc.NextFire, Time: sc.NextFire, Outcome: store.FireQueued},
		sc.NextFire.Add(24*time.Hour), &store.Job{Kind: "bench", Spec: sc.Job, State: store.JobQueued})
	if err != nil || f.Seq != 3 || f.Job != "job-5" {
		t.Fatalf("firing the imported schedule: %+v, %v; want firing 3 queueing job-5", f, err)
	}
}
