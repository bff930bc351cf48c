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
