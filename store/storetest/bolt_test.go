package storetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/dbcopy"
	"github.com/vllm-tuner/tuner/store/storetest"
)

// BoltOpener opens a bbolt store in a test's temp dir.
func boltOpener(t *testing.T, now func() time.Time) func() store.DB {
	path := filepath.Join(t.TempDir(), "tuner.db")
	return func() store.DB {
		s, err := boltstore.Open(context.Background(), path, boltstore.Options{Timeout: 5 * time.Second, NoSync: true, Now: now, MinFreeBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestBolt(t *testing.T) { storetest.Run(t, boltOpener) }

// TestBoltCopy: dbcopy between two bbolt files keeps every record, the
// service's jobs and schedules included (the bbolt side of `tuner db copy`;
// the PostgreSQL round trip is in pgstore); a copy into a database that has
// benchmark runs of its own points the jobs at the runs' new IDs; an import
// with a gap in the numbering is refused.
func TestBoltCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(name string) *boltstore.Store {
		s, err := boltstore.Open(ctx, filepath.Join(dir, name), boltstore.Options{NoSync: true, Now: storetest.Clock(), MinFreeBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open("a.db"), open("b.db")
	studies := storetest.Script(t, a, 8, 12)
	storetest.ScriptService(t, a, studies)
	n, err := dbcopy.Copy(ctx, b, a)
	if err != nil || n != (dbcopy.Stats{Studies: 3, Trials: 37, Models: 1, Runs: 2, Jobs: 2, Schedules: 2}) {
		t.Fatalf("copy: %+v, %v", n, err)
	}
	want, got := storetest.Snapshot(t, a), storetest.Snapshot(t, b)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s differs:\nwant %.300s\ngot  %.300s", k, v, got[k])
		}
	}
	if rep, err := b.Check(ctx); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check of the copy: %v %v", rep.Problems, err)
	}
	if _, err := dbcopy.Copy(ctx, b, a); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second copy: %v, want ErrExists", err)
	}
	d := open("d.db")
	if _, err := d.ImportRun(ctx, &store.Run{Source: "import", Model: "x", State: store.RunOK}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dbcopy.Copy(ctx, d, a); err != nil {
		t.Fatal(err)
	}
	j, err := d.Job(ctx, "job-1")
	if err != nil || len(j.BenchRuns) != 1 || j.BenchRuns[0] != "r3" || len(j.Gates) != 1 || j.Gates[0].Run != "r3" || j.Gates[0].Base != "r2" {
		t.Fatalf("job in a database with a run of its own: %+v, %v; want runs r3 (was r2) gated against r2 (was r1)", j, err)
	}
	if r, err := d.Run(ctx, "r3"); err != nil || r.Labels["schedule"] != "sched-1" {
		t.Fatalf("run r3 of the copy: %+v, %v", r, err)
	}
	ts, err := a.Trials(ctx, studies[0].ID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	c := open("c.db")
	if err := c.ImportStudy(ctx, studies[0], append(ts[:2:2], ts[3:]...)); err == nil || !strings.Contains(err.Error(), "want "+store.TrialID(studies[0].ID, 3)) {
		t.Fatalf("import with a gap: %v", err)
	}
}

// BenchmarkBigStudy: import and first read of a 10,000-trial study (10,000
// distinct configs) on a bbolt file; see storetest.BenchImportRead.
func BenchmarkBigStudy(b *testing.B) {
	storetest.BenchImportRead(b, func() store.DB {
		s, err := boltstore.Open(context.Background(), filepath.Join(b.TempDir(), "big.db"), boltstore.Options{MinFreeBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}, 10000)
}
