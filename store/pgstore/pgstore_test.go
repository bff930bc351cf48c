package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/dbcopy"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/store/pgstore/pgtest"
	"github.com/vllm-tuner/tuner/store/storetest"
	"net"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func pgOpener(t *testing.T, now func() time.Time) func() store.DB {
	url := pgtest.DB(t)
	return func() store.DB {
		s, err := pgstore.Open(context.Background(), pgstore.Config{URL: url, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, pgOpener) }

// TestSameAsBolt runs one script through both backends and compares every
// record a reader can see.
func TestSameAsBolt(t *testing.T) {
	ctx := context.Background()
	pg, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.DB(t), Now: storetest.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	bolt, err := boltstore.Open(ctx, filepath.Join(t.TempDir(), "tuner.db"), boltstore.Options{NoSync: true, Now: storetest.Clock(), MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	storetest.Script(t, pg, 42, 30)
	storetest.Script(t, bolt, 42, 30)
	a, b := storetest.Snapshot(t, bolt), storetest.Snapshot(t, pg)
	if len(a) != len(b) {
		t.Fatalf("bbolt shows %d record sets, PostgreSQL %d", len(a), len(b))
	}
	for k, va := range a {
		// Sessions are random per writer; compare without them.
		va, vb := dropSessions(va), dropSessions(b[k])
		if va != vb {
			t.Errorf("%s differs:\nbbolt %.300s\npg    %.300s", k, va, vb)
		}
	}
}

func dropSessions(s string) string {
	for {
		i := strings.Index(s, `"session":"`)
		if i < 0 {
			return s
		}
		j := strings.IndexByte(s[i+11:], '"')
		s = s[:i] + s[i+11+j+1:]
	}
}

// TestConcurrentWriters: two Stores (two workers' connections) write one
// study at once: sequences are unique and the maintained fronts equal the
// rebuilt ones (the front row lock loses no point).
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	var stores []*pgstore.Store
	for range 3 {
		stores = append(stores, openPG(t, url))
	}
	st, err := stores[0].EnsureStudy(ctx, storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for i, s := range stores {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for range 20 {
				cfg := storetest.Config(r)
				tr, err := s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{})
				if err == nil {
					_, err = s.FinishTrial(ctx, tr.ID, storetest.Result(r, cfg))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ts, err := stores[0].Trials(ctx, st.ID, store.TrialFilter{})
	if err != nil || len(ts) != 60 {
		t.Fatalf("%d trials, %v; want 60", len(ts), err)
	}
	for i, tr := range ts {
		if tr.Seq != uint64(i+1) || tr.State == store.StateRunning {
			t.Fatalf("trial %d: seq %d state %s", i, tr.Seq, tr.State)
		}
	}
	m, _ := stores[1].Front(ctx, st.ID, store.FrontQuery{})
	rb, err := stores[2].RebuildFront(ctx, st.ID)
	if err != nil || !store.SameFront(m, rb) || len(m.Points) == 0 {
		t.Fatalf("maintained front %d points, rebuilt %d (%v)", len(m.Points), len(rb.Points), err)
	}
}

// TestConnectErrors: a wrong password or an unreachable server is
// ErrConnect naming host and database, never the password.
func TestConnectErrors(t *testing.T) {
	url := pgtest.DB(t)
	db := url[strings.LastIndexByte(url, '/')+1 : strings.IndexByte(url, '?')]
	wrong := strings.Replace(url, pgtest.Password, "Wr0ngPassw0rd", 1)
	dead := "postgres://tuner:S3cretDead@127.0.0.1:1/nodb?sslmode=disable&connect_timeout=5"
	for _, tc := range []struct{ name, url, secret, want string }{
		{"wrong password", wrong, "Wr0ngPassw0rd", "127.0.0.1:"},
		{"unreachable", dead, "S3cretDead", "127.0.0.1:1/nodb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := pgstore.Open(ctx, pgstore.Config{URL: tc.url})
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, pgstore.ErrConnect) {
				t.Errorf("error %v is not ErrConnect", err)
			}
			msg := err.Error()
			if strings.Contains(msg, tc.secret) {
				t.Errorf("error shows the password: %s", msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not name %q", msg, tc.want)
			}
		})
	}
	t.Run("password in the query", func(t *testing.T) {
		u := strings.Replace(wrong, "Wr0ngPassw0rd@", "@", 1) + "&password=QueryS3cret"
		_, err := pgstore.Open(context.Background(), pgstore.Config{URL: u})
		if err == nil || strings.Contains(err.Error(), "QueryS3cret") {
			t.Fatalf("error %v", err)
		}
	})
	if strings.Contains(wrong, db) {
		s, err := pgstore.Open(context.Background(), pgstore.Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if p := s.Path(); strings.Contains(p, pgtest.Password) || !strings.Contains(p, db) {
			t.Errorf("Path %q shows the password or lacks the database", p)
		}
	}
}

// TestMigrations: Open migrates once; a second Migrate applies nothing; a
// read-only Open of an unmigrated database asks for a migration.
func TestMigrations(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	if _, err := pgstore.Open(ctx, pgstore.Config{URL: url, ReadOnly: true}); !errors.Is(err, store.ErrNeedsMigration) {
		t.Fatalf("read-only open of an empty database: %v, want ErrNeedsMigration", err)
	}
	s := openPG(t, url)
	n, err := s.Migrate(ctx)
	if err != nil || n != pgstore.SchemaVersion() {
		t.Fatalf("second migrate: schema %d (%v), want %d", n, err, pgstore.SchemaVersion())
	}
	ro, err := pgstore.Open(ctx, pgstore.Config{URL: url, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.EnsureStudy(ctx, storetest.Key("m", "g", "chat", "")); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("write through a read-only store: %v, want ErrReadOnly", err)
	}
}

// TestMigrateBinarySummaries: migration 6 fills the binary summaries of
// a database whose trials kept JSON ones; Check then finds nothing wrong.
func TestMigrateBinarySummaries(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	s := openPG(t, url)
	studies := storetest.Script(t, s, 11, 8)
	s.Close()
	// Back to schema 5: a JSON summary column, no binary one.
	execSQL(t, url, `ALTER TABLE trials ADD COLUMN summary json;
		UPDATE trials SET summary = '{}';
		ALTER TABLE trials ALTER COLUMN summary SET NOT NULL;
		ALTER TABLE trials DROP COLUMN sum;
		ALTER TABLE trials DROP COLUMN lease_len;
		ALTER TABLE workers DROP COLUMN lease_len;
		DELETE FROM schema_migrations WHERE version >= 6`)
	s = openPG(t, url)
	if rep, err := s.Check(ctx); err != nil || len(rep.Problems) > 0 || rep.Trials != 3*8+1 {
		t.Fatalf("check after migration: %+v, %v", rep, err)
	}
	for _, st := range studies {
		ts, err1 := s.Trials(ctx, st.ID, store.TrialFilter{})
		sums, err2 := s.Summaries(ctx, st.ID, store.TrialFilter{})
		if err1 != nil || err2 != nil || len(sums) != len(ts) {
			t.Fatalf("%d summaries for %d trials: %v %v", len(sums), len(ts), err1, err2)
		}
		for i := range ts {
			want := store.Summarize(&ts[i])
			if !bytes.Equal(store.EncodeSummary(&sums[i]), store.EncodeSummary(&want)) {
				t.Fatalf("summary of %s after migration differs from its trial", ts[i].ID)
			}
		}
	}
}

// The search loop's store interface.

// TestLockStudy: one search per study across processes: a second lock
// fails with ErrStudyLocked until the first is released.
func TestLockStudy(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	a := openPG(t, url)
	b := openPG(t, url)
	st, err := a.EnsureStudy(ctx, storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.LockStudy(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockStudy(ctx, st.ID); !errors.Is(err, store.ErrStudyLocked) {
		t.Fatalf("second lock: %v, want ErrStudyLocked", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := b.LockStudy(ctx, st.ID)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
}

// TestCopyRoundTrip: bbolt -> PostgreSQL -> a new bbolt file keeps every
// record (sessions included), the fronts, benchmark runs, the service's
// jobs and schedules with their history, and the workers' shared spec, and
// so does a backup of the PostgreSQL database (db backup); a second copy
// into a database that has the studies is refused.
func TestCopyRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, err := boltstore.Open(ctx, filepath.Join(dir, "a.db"), boltstore.Options{NoSync: true, Now: storetest.Clock(), MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	storetest.ScriptService(t, src, storetest.Script(t, src, 5, 20))
	want := storetest.Snapshot(t, src)

	pg, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.DB(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	n, err := dbcopy.Copy(ctx, pg, src)
	if err != nil {
		t.Fatal(err)
	}
	if n != (dbcopy.Stats{Studies: 3, Trials: 61, Models: 1, Runs: 2, Jobs: 2, Schedules: 2}) {
		t.Fatalf("copied %+v, want 3 studies, 61 trials, 1 model, 2 runs, 2 jobs, 2 schedules", n)
	}
	back, err := boltstore.Open(ctx, filepath.Join(dir, "b.db"), boltstore.Options{NoSync: true, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if _, err := dbcopy.Copy(ctx, back, pg); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if err := pg.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	bk, err := boltstore.Open(ctx, backup, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	for name, got := range map[string]map[string]string{"PostgreSQL": storetest.Snapshot(t, pg), "bbolt copy": storetest.Snapshot(t, back),
		"backup": storetest.Snapshot(t, bk)} {
		if len(got) != len(want) {
			t.Fatalf("%s: %d record sets, want %d", name, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s differs:\nwant %.300s\ngot  %.300s", name, k, v, got[k])
			}
		}
	}
	rep, err := back.Check(ctx)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check of the copy: %v %v", rep.Problems, err)
	}
	if _, err := dbcopy.Copy(ctx, pg, src); !errors.Is(err, store.ErrExists) {
		t.Fatalf("copy into a database with the studies: %v, want ErrExists", err)
	}
}

// TestCheck: a healthy database checks clean; a front edited behind the
// store's back, a trial whose state column disagrees with its record and a
// lost trial are each reported.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	s := openPG(t, url)
	studies := storetest.Script(t, s, 3, 10)
	rep, err := s.Check(ctx)
	if err != nil || rep.Studies != 3 || rep.Trials != 31 || rep.Running != 1 || rep.Fronts == 0 || rep.Models != 1 {
		t.Fatalf("healthy check: %+v, %v", rep, err)
	}
	id := studies[0].ID
	for _, sql := range []string{
		"UPDATE fronts SET rec = json_build_object('v', 2, 'key', key, 'objectives', rec->'objectives', 'points', '[]'::json) WHERE key = 'study/" + id + "'",
		"UPDATE trials SET state = 'ok' WHERE study_id = '" + id + "' AND seq = 2 AND state <> 'ok'",
		"DELETE FROM trials WHERE study_id = '" + studies[2].ID + "' AND seq = 3",
	} {
		execSQL(t, url, sql)
	}
	rep, err = s.Check(ctx)
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("check of a damaged database: %v", err)
	}
	want := []string{"front study/" + id, "trial 3 missing", "10 trials begun, 9 readable"}
	all := strings.Join(rep.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
}

// TestInterruptedWhenConnectionDies: a writer whose connections die (its
// process killed: the server ends its backends) leaves a running trial the
// next writer marks interrupted, while a live writer's trial is kept.
func TestInterruptedWhenConnectionDies(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	a := openPG(t, url)
	st, err := a.EnsureStudy(ctx, storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := a.BeginTrial(ctx, st.ID, storetest.Config(rand.New(rand.NewPCG(1, 1))), store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	endConnections(t, url)
	b := openPG(t, url)
	got, err := b.Trial(ctx, tr.ID)
	if err != nil || got.State != store.StateInterrupted {
		t.Fatalf("trial of a killed writer: %s, %v; want interrupted", got.State, err)
	}
	// b is alive: its running trial survives c's open.
	tr2, err := b.BeginTrial(ctx, st.ID, storetest.Config(rand.New(rand.NewPCG(2, 2))), store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := openPG(t, url)
	if got, err := c.Trial(ctx, tr2.ID); err != nil || got.State != store.StateRunning {
		t.Fatalf("a live writer's trial: %s, %v; want running", got.State, err)
	}
}

// TestNoAnswer: a server that accepts TCP and never answers is an error
// matching ErrConnect and store.ErrNoAnswer that names host and database,
// after the URL's connect_timeout (a hang before).
func TestNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	_, err = pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://tuner:Sil3nt@" + addr + "/studies?sslmode=disable&connect_timeout=1"})
	if !errors.Is(err, pgstore.ErrConnect) || !errors.Is(err, store.ErrNoAnswer) {
		t.Fatalf("error %v, want ErrConnect and ErrNoAnswer", err)
	}
	if msg := err.Error(); !strings.Contains(msg, addr+"/studies") || strings.Contains(msg, "Sil3nt") {
		t.Fatalf("error %q: want host and database named, no password", msg)
	}
}

// TestLeasedTrialOutlivesSession: a server restart ends every connection,
// so a live worker's session lock is gone; the leased trial it runs must
// not be taken for a dead process's by the next writer's open (the lease
// rules it: reaped only once expired, with the lease named).
func TestLeasedTrialOutlivesSession(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	a := openPG(t, url)
	st, err := a.EnsureStudy(ctx, storetest.Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := a.ClaimTrial(ctx, st.ID, storetest.Config(rand.New(rand.NewPCG(3, 3))), store.ClaimOptions{Worker: "a", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	endConnections(t, url)
	b := openPG(t, url)
	if got, err := b.Trial(ctx, tr.ID); err != nil || got.State != store.StateRunning {
		t.Fatalf("leased trial after its writer's session ended: %s %q, %v; want running", got.State, got.Notes, err)
	}
	time.Sleep(1100 * time.Millisecond)
	reaped, err := b.ReapExpired(ctx, st.ID)
	if err != nil || len(reaped) != 1 || !strings.Contains(reaped[0].Notes, "lease of worker a expired") {
		t.Fatalf("reaped %+v, %v; want the trial, its lease named", reaped, err)
	}
}

// endConnections ends every connection to url's database, as a killed
// process's or a server restart's end.
func endConnections(t *testing.T, url string) {
	t.Helper()
	execSQL(t, url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
}

// execSQL runs sql on url's database over a connection of its own, behind
// the store's back.
func execSQL(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// openPG opens url for writing, closed when t ends.
func openPG(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// endLease makes the lease of trial id run out now (the server's clock).
func endLease(t *testing.T, url, id string) {
	t.Helper()
	sid, seq, err := store.ParseTrialID(id)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, url, "UPDATE trials SET lease_until = now() - interval '1 second' WHERE study_id = $1 AND seq = $2", sid, int64(seq))
}
