package pgstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
	"github.com/vllm-tuner/tuner/store/storetest"
)

// TestLeases: a config (and re-measurement index) is claimed once among
// concurrent workers; the search budget is never overshot; a lease renewed
// by its worker holds, an expired one is reaped (interrupted, the config
// free again) and its worker's heartbeat then fails with ErrLeaseLost;
// membership counts the live workers and refuses a name in use.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	a, b := openPG(t, url), openPG(t, url)
	st, err := a.EnsureStudy(ctx, storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.JoinStudy(ctx, st.ID, "a", time.Minute, []byte(`{"seed":1}`))
	if err != nil || m.Others != 0 {
		t.Fatalf("join a: %+v %v", m, err)
	}
	if m, err = b.JoinStudy(ctx, st.ID, "b", time.Minute, []byte(`{"seed":2}`)); err != nil || m.Others != 1 {
		t.Fatalf("join b: %+v %v", m, err)
	}
	if _, err := b.JoinStudy(ctx, st.ID, "a", time.Minute, nil); !errors.Is(err, store.ErrWorkerName) {
		t.Fatalf("second worker named a: %v, want ErrWorkerName", err)
	}
	if spec, err := b.StudySpec(ctx, st.ID); err != nil || string(spec) != `{"seed":1}` {
		t.Fatalf("spec %s %v: want the first worker's", spec, err)
	}

	// Eight concurrent claims of one config: one wins.
	cfg := storetest.Config(rand.New(rand.NewPCG(1, 2)))
	var wins, lost int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			_, err := s.ClaimTrial(ctx, st.ID, cfg, store.ClaimOptions{Worker: "w", Lease: time.Minute})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrClaimed):
				lost++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || lost != 7 {
		t.Fatalf("%d claims won, %d refused; want 1 and 7", wins, lost)
	}
	// Re-measurement 1 of the same config is another claim.
	rep, err := b.ClaimTrial(ctx, st.ID, cfg, store.ClaimOptions{Repeat: 1, Worker: "b", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The search budget counts running and finished search trials.
	r := rand.New(rand.NewPCG(3, 4))
	if _, err := a.ClaimTrial(ctx, st.ID, storetest.Config(r), store.ClaimOptions{Worker: "a", Lease: time.Minute, MaxSearch: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ClaimTrial(ctx, st.ID, storetest.Config(r), store.ClaimOptions{Worker: "a", Lease: time.Minute, MaxSearch: 2}); !errors.Is(err, store.ErrTrialBudget) {
		t.Fatalf("third search trial with --trials 2: %v, want ErrTrialBudget", err)
	}

	// A renewed lease holds; an expired one is reaped.
	if err := b.Heartbeat(ctx, st.ID, "b", rep.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	short, err := a.ClaimTrial(ctx, st.ID, storetest.Config(r), store.ClaimOptions{Worker: "a", Lease: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // the lease is 1 us of the server's clock
	reaped, err := b.ReapExpired(ctx, st.ID)
	if err != nil || len(reaped) != 1 || reaped[0].ID != short.ID {
		t.Fatalf("reaped %v (%v), want %s", reaped, err, short.ID)
	}
	got, err := a.Trial(ctx, short.ID)
	if err != nil || got.State != store.StateInterrupted || !strings.Contains(got.Notes, "lease of worker a expired") {
		t.Fatalf("reaped trial: %s %q %v", got.State, got.Notes, err)
	}
	if err := a.Heartbeat(ctx, st.ID, "a", short.ID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat of a reaped trial: %v, want ErrLeaseLost", err)
	}
	if _, err := a.FinishTrial(ctx, short.ID, storetest.Result(r, short.Config)); !errors.Is(err, store.ErrState) {
		t.Fatalf("finish of a reaped trial: %v, want ErrState", err)
	}
	// Its config is free again.
	if _, err := b.ClaimTrial(ctx, st.ID, short.Config, store.ClaimOptions{Worker: "b", Lease: time.Minute}); err != nil {
		t.Fatalf("claim of a reaped config: %v", err)
	}
	if err := a.LeaveStudy(ctx, st.ID, "a"); err != nil {
		t.Fatal(err)
	}
	// b is live; w never joined but holds an unexpired lease: both count.
	if m, err := a.JoinStudy(ctx, st.ID, "a", time.Minute, nil); err != nil || m.Others != 2 {
		t.Fatalf("join after leave: %+v %v (want 2 others: b live, w holding a lease)", m, err)
	}
}

// TestLeaseAfterRestart: a lease that ran out while the server was down
// holds for its length again after the restart, so its worker, back with
// the measured result it kept, finishes the trial instead of having it
// taken back by the first worker that reconnects; a lease shorter than the
// time since the restart is reaped as usual.
func TestLeaseAfterRestart(t *testing.T) {
	ctx := context.Background()
	c, url, s, st := ownStudy(t)
	r := rand.New(rand.NewPCG(4, 4))
	long, err := s.ClaimTrial(ctx, st.ID, storetest.Config(r), store.ClaimOptions{Worker: "a", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c.Halt()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The outage outlasted the lease (as if a minute had passed).
	admin := openPG(t, url)
	short, err := admin.ClaimTrial(ctx, st.ID, storetest.Config(r), store.ClaimOptions{Worker: "b", Lease: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	endLease(t, url, long.ID)
	time.Sleep(2 * time.Millisecond) // the short lease is 1 us of the server's clock
	reaped, err := admin.ReapExpired(ctx, st.ID)
	if err != nil || len(reaped) != 1 || reaped[0].ID != short.ID {
		var ids []string
		for _, tr := range reaped {
			ids = append(ids, tr.ID)
		}
		t.Fatalf("reaped %v (%v) right after the restart, want only %s (a 1 us lease)", ids, err, short.ID)
	}
	var fin store.Trial
	for range 3 { // the pool's connections from before the restart fail once
		if fin, err = s.FinishTrial(ctx, long.ID, storetest.Result(r, long.Config)); err == nil {
			break
		}
	}
	if err != nil || !fin.State.Finished() {
		t.Fatalf("finish after the restart: %s, %v", fin.State, err)
	}
}

// TestJoinAfterRestart: a server restart gives the live workers' memberships
// and trial leases their length again, so a worker joining right after an
// outage that outlasted them counts the workers cut off with it (it
// counted none and took the study as its own); a membership of a short
// lease granted after the restart lapses as usual.
func TestJoinAfterRestart(t *testing.T) {
	ctx := context.Background()
	c, url, s, st := ownStudy(t)
	if _, err := s.JoinStudy(ctx, st.ID, "a", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	// b holds a trial lease only (its membership lapsed during a long trial).
	tr, err := s.ClaimTrial(ctx, st.ID, storetest.Config(rand.New(rand.NewPCG(5, 5))), store.ClaimOptions{Worker: "b", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c.Halt()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The outage outlasted every lease (as if a minute had passed).
	endLease(t, url, tr.ID)
	execSQL(t, url, "UPDATE workers SET until = now() - interval '1 second'")
	after := openPG(t, url)
	if _, err := after.JoinStudy(ctx, st.ID, "d", time.Microsecond, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // d's lease is 1 us of the server's clock
	m, err := after.JoinStudy(ctx, st.ID, "c", time.Minute, nil)
	if err != nil || m.Others != 2 {
		t.Fatalf("join right after the restart: %+v, %v; want 2 others (a's membership, b's trial lease; not d's lapsed one)", m, err)
	}
	if _, err := after.JoinStudy(ctx, st.ID, "a", time.Minute, nil); !errors.Is(err, store.ErrWorkerName) {
		t.Fatalf("another worker named a while a's membership holds: %v, want ErrWorkerName", err)
	}
}

// ownStudy is a study in a database of a cluster of the test's own (which
// it may halt and restart), and a store on it.
func ownStudy(t *testing.T) (*pgtest.Cluster, string, *pgstore.Store, store.Study) {
	t.Helper()
	c := pgtest.Own(t)
	url, err := c.CreateDB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := openPG(t, url)
	st, err := s.EnsureStudy(context.Background(), storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	return c, url, s, st
}
