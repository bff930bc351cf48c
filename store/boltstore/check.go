package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
)

// Check verifies the file: every record decodes; trials sit under their own
// study and sequence key, within the bucket's sequence; summaries and the
// running index match the trials; every maintained front (and its vector
// cache) equals the front rebuilt from the trial records; model files match
// their checksums; and finally bbolt's own page-level check (run last, after
// this package's walk has read every page under panic protection).
//
// A search may be writing meanwhile: Check first copies the file (one read
// transaction, so the lock is held only as long as the copy takes) beside
// it and verifies the copy; when the copy cannot be made (e.g. no space) it
// checks in place, holding the shared lock throughout. Problems come back in
// the report and, when there are any, as a *CorruptError naming the file.
func (s *Store) Check(ctx context.Context) (store.CheckReport, error) {
	rep := store.CheckReport{Path: s.path}
	target := s
	snap := filepath.Join(filepath.Dir(s.path), "."+filepath.Base(s.path)+".check-"+store.RandomID())
	defer os.Remove(snap)
	if err := s.copyTo(ctx, snap, false); err == nil {
		target = &Store{path: snap, opts: s.opts, log: s.log, noGate: true}
		target.opts.ReadOnly = true
	} else if ctx.Err() != nil {
		return rep, ctx.Err()
	} else if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrBusy) || errors.Is(err, store.ErrNotFound) {
		return rep, err
	} else {
		s.log.Warn("checking in place: cannot copy the database", "path", s.path, "err", err)
	}
	err := target.view(ctx, func(tx *bolt.Tx) error {
		problem := rep.Problemf
		// Walk the page structure first (bounds-checked, in this
		// goroutine): bbolt's Tx.Check trusts it (see walkPages).
		raw, err := os.ReadFile(target.path)
		if err != nil {
			return err
		}
		pageProblems := walkPages(raw, store.MaxProblems)
		for _, p := range pageProblems {
			problem("pages: %s", p)
		}
		v, err := schemaVersion(tx)
		if err != nil {
			return err
		}
		rep.Schema = v
		if v != SchemaVersion {
			problem("schema %d, want %d (open for writing to migrate)", v, SchemaVersion)
			return nil
		}
		for _, b := range allBuckets {
			if tx.Bucket(b) == nil {
				problem("bucket %s missing", b)
			}
		}
		if len(rep.Problems) > 0 {
			return nil
		}
		checkRecords(ctx, tx, &rep, problem)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(pageProblems) == 0 {
			for err := range tx.Check() {
				problem("bbolt: %v", err)
			}
		}
		return nil
	})
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		ce.Path = s.path // the copy's damage is the original's
	}
	if err != nil {
		return rep, err
	}
	if len(rep.Problems) > 0 {
		return rep, &store.CorruptError{Path: s.path, Problems: rep.Problems}
	}
	return rep, nil
}

func checkRecords(ctx context.Context, tx *bolt.Tx, rep *store.CheckReport, problem func(string, ...any)) {
	studies := map[string]store.Study{}
	nstudies := 0
	_ = tx.Bucket(bucketStudies).ForEach(func(k, v []byte) error {
		nstudies++
		st, err := decodeStudy(v, false)
		switch {
		case err != nil:
			problem("study %q: %v", k, err)
		case st.ID != string(k):
			problem("study %q stored under key %q", st.ID, k)
		case st.Key.ID() != st.ID:
			problem("study %s: id does not match its key (hash %s)", st.ID, st.Key.ID())
		default:
			studies[st.ID] = st
		}
		return nil
	})
	rep.Studies = len(studies)
	if seq := tx.Bucket(bucketStudies).Sequence(); uint64(nstudies) != seq {
		problem("studies: %d records, %d created (records or pages lost)", nstudies, seq)
	}
	for id := range studies {
		for _, b := range [][]byte{bucketTrials, bucketSummaries} {
			if tx.Bucket(b).Bucket([]byte(id)) == nil {
				problem("study %s: its %s bucket is missing", id, b)
			}
		}
	}

	running := map[string]bool{}
	_ = tx.Bucket(bucketRunning).ForEach(func(k, v []byte) error {
		if len(k) != 20 {
			problem("running index: bad key %x", k)
			return nil
		}
		running[store.TrialID(string(k[:12]), beUint64(k[12:]))] = true
		return nil
	})
	rep.Running = len(running)
	cands := map[string][]store.Point{}

	_ = tx.Bucket(bucketTrials).ForEach(func(sid, v []byte) error {
		if v != nil {
			problem("trials: stray key %q (want a bucket per study)", sid)
			return nil
		}
		if _, ok := studies[string(sid)]; !ok {
			problem("trials of unknown study %q", sid)
		}
		tb := tx.Bucket(bucketTrials).Bucket(sid)
		var last, n uint64
		measured := map[string]string{} // config ID and repeat -> first trial
		defer func() {
			// Keys are unique, ascending and at most the sequence, so the
			// count equals the sequence exactly when none is missing.
			if n != tb.Sequence() {
				problem("study %s: %d trial records, %d begun (records lost)", sid, n, tb.Sequence())
			}
		}()
		_ = tb.ForEach(func(k, v []byte) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.Trials++
			n++
			if len(k) != 8 {
				problem("study %s: bad trial key %x", sid, k)
				return nil
			}
			seq := beUint64(k)
			t, err := decodeTrial(v, false)
			switch {
			case err != nil:
				problem("trial %s: %v", store.TrialID(string(sid), seq), err)
				return nil
			case t.StudyID != string(sid) || t.Seq != seq:
				problem("trial %s stored under %s key %d", t.ID, sid, seq)
			case seq <= last:
				problem("study %s: trial keys out of order at %d", sid, seq)
			case seq > tb.Sequence():
				problem("trial %s: sequence beyond the bucket's %d", t.ID, tb.Sequence())
			}
			last = seq
			rep.Measured(measured, &t)
			if st, ok := studies[t.StudyID]; ok && t.StudyID == string(sid) && t.Seq == seq {
				if p, ok := store.Eligible(st, st.SLO(), &t, store.FrontQuery{}); ok {
					cands[st.ID] = append(cands[st.ID], p)
				}
			}
			sm := store.Summarize(&t)
			want := store.Seal(store.EncodeSummary(&sm))
			var have []byte
			if sb := tx.Bucket(bucketSummaries).Bucket(sid); sb != nil {
				have = sb.Get(k)
			}
			if !bytes.Equal(want, have) {
				problem("trial %s: summary missing or stale", t.ID)
			}
			if (t.State == store.StateRunning) != running[t.ID] {
				problem("trial %s: state %s but running index says %v", t.ID, t.State, running[t.ID])
			}
			delete(running, t.ID)
			return nil
		})
		return nil
	})
	for id := range running {
		problem("running index names missing trial %s", id)
	}
	_ = tx.Bucket(bucketSummaries).ForEach(func(sid, v []byte) error {
		tb := tx.Bucket(bucketTrials).Bucket(sid)
		sb := tx.Bucket(bucketSummaries).Bucket(sid)
		if v != nil || sb == nil {
			problem("summaries: stray key %q", sid)
			return nil
		}
		return sb.ForEach(func(k, _ []byte) error {
			if tb == nil || tb.Get(k) == nil {
				problem("summary %x of study %s has no trial", k, sid)
			}
			return nil
		})
	})

	list := make([]store.Study, 0, len(studies))
	for _, st := range studies {
		list = append(list, st)
	}
	want := store.FrontsFrom(list, cands)
	have := map[string]store.Front{}
	_ = tx.Bucket(bucketFronts).ForEach(func(k, v []byte) error {
		rep.Fronts++
		f, err := decodeFront(v, false)
		if err != nil {
			problem("front %s: %v", k, err)
			return nil
		}
		have[string(k)] = f
		vecs, err := decodeSealedVectors(tx.Bucket(bucketFrontVecs).Get(k))
		if err != nil || !reflect.DeepEqual(vecs, f.Vectors()) && len(f.Points) > 0 {
			problem("front %s: vector cache missing or stale", k)
		}
		return nil
	})
	_ = tx.Bucket(bucketFrontVecs).ForEach(func(k, _ []byte) error {
		if tx.Bucket(bucketFronts).Get(k) == nil {
			problem("front vector cache %s has no front", k)
		}
		return nil
	})
	rep.CompareFronts(have, want)

	_ = tx.Bucket(bucketModelMeta).ForEach(func(k, v []byte) error {
		rep.Models++
		m, err := decodeModelMeta(v)
		if err != nil {
			problem("model %s: %v", k, err)
			return nil
		}
		blob := tx.Bucket(bucketModels).Get(k)
		if blob == nil || !m.Matches(blob) {
			problem("model %s: file missing or checksum mismatch", k)
		}
		return nil
	})
}

// Backup writes a consistent copy of the database to dst from one read
// transaction (bbolt's Tx.WriteTo, the body of Tx.CopyFile, plus an fsync):
// the copy goes to a temporary file beside dst and is renamed into place,
// so dst is either the old file or a complete copy.
func (s *Store) Backup(ctx context.Context, dst string) error {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if abs == s.path {
		return fmt.Errorf("backup: destination is the database itself")
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return fmt.Errorf("backup: %s is a directory", abs)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	tmp := abs + ".tmp-" + store.RandomID()
	defer os.Remove(tmp)
	if err := s.copyTo(ctx, tmp, true); err != nil {
		return fmt.Errorf("backup to %s: %w", abs, err)
	}
	// Verify the copy opens and carries the schema before it replaces dst.
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true, Timeout: s.opts.Timeout})
	if err != nil {
		return fmt.Errorf("backup to %s: the copy does not open: %w", abs, err)
	}
	var meta []byte
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			meta = bytes.Clone(b.Get(keySchema))
		}
		return nil
	})
	_ = db.Close()
	if meta == nil {
		return fmt.Errorf("backup to %s: the copy has no schema record", abs)
	}
	if err := os.Rename(tmp, abs); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	syncDir(filepath.Dir(abs))
	return nil
}

// copyTo writes a consistent copy of the database to path (which must not
// exist) in one read transaction, with an fsync when durable.
func (s *Store) copyTo(ctx context.Context, path string, durable bool) error {
	return s.view(ctx, func(tx *bolt.Tx) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = tx.WriteTo(f)
		if err == nil && durable {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}
