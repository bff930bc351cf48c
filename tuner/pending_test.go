package tuner

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/storetest"
)

// TestStorePending: a result kept while the database was away is written
// whole, owner-only, and stored by the next start: into its trial when the
// lease still holds, into a new claim of its config when the trial was
// taken back, dropped when the config was measured meanwhile; every file
// is removed after.
func TestStorePending(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := boltstore.Open(ctx, filepath.Join(dir, "t.db"), boltstore.Options{NoSync: true, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.EnsureStudy(ctx, storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	claim := func(lease time.Duration) store.Trial {
		tr, err := db.ClaimTrial(ctx, st.ID, storetest.Config(r), store.ClaimOptions{Worker: "w", Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	held, lost, taken := claim(time.Minute), claim(100*time.Millisecond), claim(100*time.Millisecond)
	spool := filepath.Join(dir, "pending", st.ID)
	for _, tr := range []store.Trial{held, lost, taken} {
		rec := store.Trial{ID: tr.ID, Config: tr.Config, Result: storetest.Result(r, tr.Config)}
		path, err := keepPending(spool, rec)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("kept result %s: %v, mode %v (want 0600)", path, err, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(spool); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("pending dir: %v, mode %v (want 0700)", err, fi.Mode().Perm())
	}
	time.Sleep(300 * time.Millisecond)
	if reaped, err := db.ReapExpired(ctx, st.ID); err != nil || len(reaped) != 2 {
		t.Fatalf("reap: %d, %v", len(reaped), err)
	}
	// Another worker measured taken's config meanwhile.
	other, err := db.ClaimTrial(ctx, st.ID, taken.Config, store.ClaimOptions{Worker: "x", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	n, err := StorePending(ctx, db, st.ID, spool, "w", time.Minute, 0, slog.New(slog.DiscardHandler))
	if err != nil || n != 2 {
		t.Fatalf("stored %d (%v), want 2", n, err)
	}
	if got, err := db.Trial(ctx, held.ID); err != nil || !got.State.Measured() || got.Result == nil {
		t.Fatalf("held trial: %+v, %v", got, err)
	}
	ts, err := db.Trials(ctx, st.ID, store.TrialFilter{ConfigID: lost.ConfigID})
	if err != nil || len(ts) != 2 || ts[0].State != store.StateInterrupted || ts[1].Result == nil || ts[1].State == store.StateRunning {
		t.Fatalf("the taken-back trial's config: %+v, %v (want interrupted, then stored)", ts, err)
	}
	if got, err := db.Trial(ctx, other.ID); err != nil || got.State != store.StateRunning {
		t.Fatalf("the other worker's trial: %+v, %v", got, err)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("files left: %v", left)
	}
}
