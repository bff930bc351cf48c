package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	bolt "go.etcd.io/bbolt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeV0Fixture builds a schema-0 file the way the first tuner wrote it:
// studies and nested trials buckets only, records without "v", trial
// "status" and "config_hash", no objectives in the study key.
func writeV0Fixture(t *testing.T, path string) (studyID string, n int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := testKey("llama", "H100-80GB", "tpot_p99<=40ms")
	key.Objectives = nil
	norm, _ := key.Normalize() // schema 0 derived the ID the same way
	studyID = norm.ID()
	r := rand.New(rand.NewPCG(20, 21))
	err = db.Update(func(tx *bolt.Tx) error {
		sb, _ := tx.CreateBucket(bucketStudies)
		tb, _ := tx.CreateBucket(bucketTrials)
		rawKey := map[string]any{
			"model": key.Model, "gpu": key.GPU, "gpu_count": key.GPUCount, "engine": key.Engine,
			"engine_version": key.EngineVersion, "workload": key.Workload, "slo": norm.SLO, "space_hash": key.SpaceHash,
		}
		st, _ := json.Marshal(map[string]any{"id": studyID, "key": rawKey, "created": "2025-06-01T00:00:00Z"})
		if err := sb.Put([]byte(studyID), st); err != nil {
			return err
		}
		b, _ := tb.CreateBucket([]byte(studyID))
		for seq := uint64(1); seq <= 12; seq++ {
			cfg := storetest.Config(r)
			rec := map[string]any{
				"id": store.TrialID(studyID, seq), "study_id": studyID, "seq": seq, "status": "running",
				"config": cfg, "config_hash": cfg.ID(), "started": "2025-06-01T00:00:00Z",
			}
			if seq < 12 {
				res := storetest.ResultOneIn(r, cfg, 20)
				rec["status"], rec["result"] = string(store.StateOf(res)), res
			}
			raw, _ := json.Marshal(rec)
			if err := b.Put(seqKey(seq), raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return studyID, 12
}

func TestMigrateV0(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v0.db")
	studyID, n := writeV0Fixture(t, path)
	if _, err := Open(ctx, path, Options{ReadOnly: true}); !errors.Is(err, store.ErrNeedsMigration) {
		t.Fatalf("read-only open of schema 0: %v, want ErrNeedsMigration", err)
	}
	s := openTest(t, path, false)
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatalf("check after migration: %v %+v", err, rep)
	}
	if rep.Schema != SchemaVersion || rep.Trials != n || rep.Studies != 1 {
		t.Errorf("report %+v", rep)
	}
	st, err := s.Study(ctx, studyID)
	if err != nil || !st.Key.Objectives.Equal(store.DefaultObjectives("")) {
		t.Fatalf("migrated study %+v %v", st, err)
	}
	ts, err := s.Trials(ctx, studyID, store.TrialFilter{})
	if err != nil || len(ts) != n {
		t.Fatalf("migrated trials %d %v", len(ts), err)
	}
	for _, tr := range ts {
		if tr.V != store.RecordVersion || tr.ConfigID != tr.Config.ID() || tr.State == store.StateRunning {
			t.Fatalf("migrated trial %+v", tr)
		}
	}
	if ts[n-1].State != store.StateInterrupted {
		t.Errorf("schema-0 running trial is %s, want interrupted", ts[n-1].State)
	}
	f, _ := s.Front(ctx, studyID, store.FrontQuery{})
	want, _ := s.RebuildFront(ctx, studyID)
	if len(f.Points) == 0 || !store.SameFront(f, want) {
		t.Errorf("migrated front %d points, rebuilt %d", len(f.Points), len(want.Points))
	}
	// New trials continue the sequence.
	next := runTrial(t, s, rand.New(rand.NewPCG(1, 1)), studyID)
	if next.Seq != uint64(n)+1 {
		t.Errorf("next seq %d, want %d", next.Seq, n+1)
	}
	// Raw records on disk are now sealed and carry "v".
	s.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketTrials).Bucket([]byte(studyID)).Get(seqKey(1))
		var probe struct{ V int }
		_ = store.DecodeStrict(raw, &probe)
		if probe.V != store.RecordVersion {
			t.Errorf("on-disk record version %d", probe.V)
		}
		return nil
	})
}

func TestSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	s := openTest(t, path, false)
	s.Close()
	db, _ := bolt.Open(path, 0o600, nil)
	_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte("99")) })
	db.Close()
	before, _ := os.ReadFile(path)
	for _, ro := range []bool{true, false} {
		if _, err := Open(ctx, path, Options{ReadOnly: ro}); !errors.Is(err, store.ErrTooNew) {
			t.Errorf("open (read-only %v) of schema 99: %v, want ErrTooNew", ro, err)
		}
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Error("a newer file was modified")
	}
}

// toSchema1 rewrites a current file as schema 1 wrote it: records without
// the checksum envelope and with "v":1, no studies count, and no trial
// buckets for studies without trials (bare, a study created here).
func toSchema1(t *testing.T, path, bare string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var unsealAll func(b *bolt.Bucket) error
	unsealAll = func(b *bolt.Bucket) error {
		type kv struct{ k, v []byte }
		var puts []kv
		var subs [][]byte
		if err := b.ForEach(func(k, v []byte) error {
			if v == nil {
				subs = append(subs, bytes.Clone(k))
				return nil
			}
			if len(v) > 0 && v[0] == store.SealMagic {
				p := bytes.Clone(v[store.SealHeader:])
				p = bytes.Replace(p, []byte(`{"v":2,`), []byte(`{"v":1,`), 1)
				puts = append(puts, kv{bytes.Clone(k), p})
			}
			return nil
		}); err != nil {
			return err
		}
		for _, p := range puts {
			if err := b.Put(p.k, p.v); err != nil {
				return err
			}
		}
		for _, k := range subs {
			if err := unsealAll(b.Bucket(k)); err != nil {
				return err
			}
		}
		return nil
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if err := unsealAll(tx.Bucket(name)); err != nil {
				return err
			}
		}
		for _, name := range [][]byte{bucketTrials, bucketSummaries} {
			if err := tx.Bucket(name).DeleteBucket([]byte(bare)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketStudies).SetSequence(0); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("1"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateV1 opens a schema-1 file (unsealed records, a study without
// trial buckets): read-only opens ask for the migration, a writable open
// seals every record, and afterwards the file checks clean and reads the
// same trials.
func TestMigrateV1(t *testing.T) {
	ctx := context.Background()
	path, studyID := filledDB(t, 40)
	s := openTest(t, path, false)
	bare, err := s.EnsureStudy(ctx, testKey("other", "g", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutModel(ctx, "m", []byte("model bytes"), store.ModelMeta{Kind: "test"}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Trials(ctx, studyID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	toSchema1(t, path, bare.ID)
	if _, err := Open(ctx, path, Options{ReadOnly: true}); !errors.Is(err, store.ErrNeedsMigration) {
		t.Fatalf("read-only open of schema 1: %v, want ErrNeedsMigration", err)
	}
	s = openTest(t, path, false)
	if rep, err := s.Check(ctx); err != nil || rep.Schema != SchemaVersion || rep.Studies != 2 || rep.Models != 1 {
		t.Fatalf("check after migration: %v %+v", err, rep)
	}
	after, err := s.Trials(ctx, studyID, store.TrialFilter{})
	if err != nil || len(after) != len(before) {
		t.Fatalf("trials after migration: %d, %v; want %d", len(after), err, len(before))
	}
	for i := range before {
		a, _ := json.Marshal(before[i])
		b, _ := json.Marshal(after[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("trial %s changed:\n%s\n%s", before[i].ID, a, b)
		}
	}
	if ts, err := s.Trials(ctx, bare.ID, store.TrialFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("study without trials: %d, %v", len(ts), err)
	}
	if _, _, err := s.GetModel(ctx, "m"); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateV2Summaries: a schema-2 file keeps version-1 summaries
// (without what the list views read); opening it for writing rewrites them
// from the trials.
func TestMigrateV2Summaries(t *testing.T) {
	ctx := context.Background()
	path, studyID := filledDB(t, 30)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucketSummaries).Bucket([]byte(studyID))
		var keys, vals [][]byte
		if err := sb.ForEach(func(k, v []byte) error {
			sm, err := store.DecodeSealedSummary(studyID, v)
			if err != nil {
				return err
			}
			// Version 1: the same bytes without version 2's trailer
			// (25 bytes when its fields are empty).
			v1 := sm
			v1.Ended, v1.Worker, v1.VRAMSource, v1.ServeArgs = time.Time{}, "", "", nil
			v1.Completed, v1.FailedRequests, v1.TokenMismatches, v1.Overloaded = 0, 0, 0, false
			v1.Missing, v1.PrefixCache, v1.Fairness, v1.StartupS, v1.TotalS = nil, nil, nil, 0, 0
			b := store.EncodeSummary(&v1)
			b = b[:len(b)-9-16]
			b[0] = 1
			keys, vals = append(keys, bytes.Clone(k)), append(vals, store.Seal(b))
			return nil
		}); err != nil {
			return err
		}
		for i := range keys {
			if err := sb.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("2"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path, Options{ReadOnly: true}); !errors.Is(err, store.ErrNeedsMigration) {
		t.Fatalf("read-only open of schema 2: %v, want ErrNeedsMigration", err)
	}
	s := openTest(t, path, false)
	if rep, err := s.Check(ctx); err != nil || rep.Schema != SchemaVersion || len(rep.Problems) > 0 {
		t.Fatalf("check after migration: %v %+v", err, rep)
	}
	ts, err := s.Trials(ctx, studyID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sums, err := s.Summaries(ctx, studyID, store.TrialFilter{})
	if err != nil || len(sums) != len(ts) {
		t.Fatalf("%d summaries, %v", len(sums), err)
	}
	for i := range ts {
		want := store.Summarize(&ts[i])
		if !bytes.Equal(store.EncodeSummary(&sums[i]), store.EncodeSummary(&want)) || sums[i].Ended.IsZero() {
			t.Fatalf("summary of %s after migration: %+v", ts[i].ID, sums[i])
		}
	}
}
