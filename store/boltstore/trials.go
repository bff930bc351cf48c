package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	bolt "go.etcd.io/bbolt"
	"os"
	"time"
)

// BeginTrial records a trial in state running, before its engine starts, and
// returns it with its sequence number and ID. One transaction.
func (s *Store) BeginTrial(ctx context.Context, studyID string, cfg spaces.Config, o store.BeginOptions) (store.Trial, error) {
	t, err := o.Trial(studyID, cfg, s.opts.Now(), s.session)
	if err != nil {
		return store.Trial{}, err
	}
	if err := s.checkFree(); err != nil {
		return store.Trial{}, fmt.Errorf("begin trial in study %s: %w", studyID, err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error { return beginTrialTx(tx, &t) })
	if err != nil {
		return store.Trial{}, fmt.Errorf("begin trial in study %s: %w", studyID, err)
	}
	return t, nil
}

func beginTrialTx(tx *bolt.Tx, t *store.Trial) error {
	if _, err := getStudy(tx, t.StudyID); err != nil {
		return err
	}
	tb, err := tx.Bucket(bucketTrials).CreateBucketIfNotExists([]byte(t.StudyID))
	if err != nil {
		return err
	}
	seq, err := tb.NextSequence()
	if err != nil {
		return err
	}
	t.Seq, t.ID = seq, store.TrialID(t.StudyID, seq)
	if err := putTrial(tx, t); err != nil {
		return err
	}
	return tx.Bucket(bucketRunning).Put(runningKey(t.StudyID, seq), []byte(t.Session))
}

// FinishTrial records how a running trial ended (its state follows from the
// result, see StateOf) and updates the study's and the group's fronts, all
// in one transaction. It fails with ErrState unless the trial is running.
func (s *Store) FinishTrial(ctx context.Context, id string, res *trial.Result) (store.Trial, error) {
	studyID, seq, err := store.ParseFinish(id, res) // outside the transaction
	if err != nil {
		return store.Trial{}, err
	}
	var t store.Trial
	err = s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		t, err = finishTrialTx(tx, studyID, seq, res, s.opts.Now().UTC())
		return err
	})
	if err != nil {
		return store.Trial{}, fmt.Errorf("finish trial %s: %w", id, err)
	}
	return t, nil
}

func finishTrialTx(tx *bolt.Tx, studyID string, seq uint64, res *trial.Result, now time.Time) (store.Trial, error) {
	st, err := getStudy(tx, studyID)
	if err != nil {
		return store.Trial{}, err
	}
	t, err := getTrial(tx, studyID, seq)
	if err != nil {
		return store.Trial{}, err
	}
	if err := t.Finish(res, now); err != nil {
		return store.Trial{}, err
	}
	if err := putTrial(tx, &t); err != nil {
		return store.Trial{}, err
	}
	if err := tx.Bucket(bucketRunning).Delete(runningKey(studyID, seq)); err != nil {
		return store.Trial{}, err
	}
	if b := tx.Bucket(bucketLeases); b != nil {
		if err := b.Delete(runningKey(studyID, seq)); err != nil {
			return store.Trial{}, err
		}
	}
	return t, addToFronts(tx, st, t)
}

// SetNotes replaces a trial's notes.
func (s *Store) SetNotes(ctx context.Context, id, notes string) error {
	studyID, seq, err := store.ParseTrialID(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		t, err := getTrial(tx, studyID, seq)
		if err != nil {
			return err
		}
		t.Notes = notes
		return putTrial(tx, &t)
	})
}

// putTrial writes a trial and its summary.
func putTrial(tx *bolt.Tx, t *store.Trial) error {
	tb, err := tx.Bucket(bucketTrials).CreateBucketIfNotExists([]byte(t.StudyID))
	if err != nil {
		return err
	}
	if err := putJSON(tb, seqKey(t.Seq), t); err != nil {
		return fmt.Errorf("trial %s: %w", t.ID, err)
	}
	return putSummary(tx, t)
}

// putSummary writes a trial's summary.
func putSummary(tx *bolt.Tx, t *store.Trial) error {
	sb, err := tx.Bucket(bucketSummaries).CreateBucketIfNotExists([]byte(t.StudyID))
	if err != nil {
		return err
	}
	sm := store.Summarize(t)
	return sb.Put(seqKey(t.Seq), store.Seal(store.EncodeSummary(&sm)))
}

func getTrial(tx *bolt.Tx, studyID string, seq uint64) (store.Trial, error) {
	tb := tx.Bucket(bucketTrials).Bucket([]byte(studyID))
	var raw []byte
	if tb != nil {
		raw = tb.Get(seqKey(seq))
	}
	if raw == nil {
		return store.Trial{}, fmt.Errorf("trial %s: %w", store.TrialID(studyID, seq), store.ErrNotFound)
	}
	return decodeAt(tx, studyID, seqKey(seq), raw)
}

// decodeAt decodes the trial stored under key in a study's bucket and
// checks that the record belongs there.
func decodeAt(tx *bolt.Tx, studyID string, key, raw []byte) (store.Trial, error) {
	t, err := decodeTrial(raw, false)
	if err != nil {
		return store.Trial{}, corrupt(tx, err)
	}
	if t.StudyID != studyID || !bytes.Equal(key, seqKey(t.Seq)) {
		return store.Trial{}, corrupt(tx, fmt.Errorf("trial %s stored under study %s key %x", t.ID, studyID, key))
	}
	return t, nil
}

// Trial returns one trial by ID.
func (s *Store) Trial(ctx context.Context, id string) (store.Trial, error) {
	studyID, seq, err := store.ParseTrialID(id)
	if err != nil {
		return store.Trial{}, err
	}
	var t store.Trial
	err = s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		t, err = getTrial(tx, studyID, seq)
		return err
	})
	return t, err
}

// Trials returns a study's trials in sequence order.
func (s *Store) Trials(ctx context.Context, studyID string, f store.TrialFilter) ([]store.Trial, error) {
	var out []store.Trial
	err := s.scanStudyFrom(ctx, studyID, f.FromSeq, func(t store.Trial) error {
		if f.Match(&t) {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// scanChunk bounds how many records one read transaction copies out, so a
// long scan never holds the file lock for long.
const scanChunk = 4096

// scanRaw calls fn with the raw records of one study's bucket (trials or
// summaries) numbered from on (0 or 1: all) in sequence order. Records are
// copied out chunk by chunk, each chunk in its own short transaction; fn
// runs outside any transaction.
func (s *Store) scanRaw(ctx context.Context, studyID string, bucket []byte, from uint64, fn func(key, val []byte) error) error {
	exists := false
	next := max(from, 1)
	start := next
	for {
		var keys, vals [][]byte
		var begun uint64
		done := true
		err := s.view(ctx, func(tx *bolt.Tx) error {
			if !exists {
				if _, err := getStudy(tx, studyID); err != nil {
					return err
				}
				exists = true
			}
			// Every study has its buckets from its creation, and trials are
			// never deleted: a missing bucket or record is damage, never a
			// study with fewer trials.
			tb := tx.Bucket(bucketTrials).Bucket([]byte(studyID))
			b := tx.Bucket(bucket).Bucket([]byte(studyID))
			if tb == nil || b == nil {
				return corrupt(tx, fmt.Errorf("study %s: its %s bucket is missing", studyID, bucket))
			}
			begun = tb.Sequence()
			c := b.Cursor()
			for k, v := c.Seek(seqKey(next)); k != nil; k, v = c.Next() {
				if len(keys) == scanChunk {
					done = false
					break
				}
				keys = append(keys, bytes.Clone(k))
				vals = append(vals, bytes.Clone(v))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range keys {
			if len(keys[i]) != 8 {
				return &store.CorruptError{Path: s.path, Err: fmt.Errorf("study %s: bad key %x in %s", studyID, keys[i], bucket)}
			}
			if k := beUint64(keys[i]); k != next {
				return &store.CorruptError{Path: s.path, Err: fmt.Errorf("study %s: %s record %d missing (the next one is %d)", studyID, bucket, next, k)}
			}
			if err := fn(keys[i], vals[i]); err != nil {
				return err
			}
			next++
		}
		if done {
			if next-1 != begun && (next != start || start <= begun) { // nothing at or past from is no damage
				return &store.CorruptError{Path: s.path, Err: fmt.Errorf("study %s: %d trials begun, %d %s records readable", studyID, begun, next-1, bucket)}
			}
			return nil
		}
	}
}

// scanStudy calls fn for each trial of a study in sequence order (see scanRaw).
func (s *Store) scanStudy(ctx context.Context, studyID string, fn func(store.Trial) error) error {
	return s.scanStudyFrom(ctx, studyID, 1, fn)
}

// scanStudyFrom is scanStudy from trial number from on.
func (s *Store) scanStudyFrom(ctx context.Context, studyID string, from uint64, fn func(store.Trial) error) error {
	return s.scanRaw(ctx, studyID, bucketTrials, from, func(k, v []byte) error {
		t, err := decodeTrial(v, false)
		if err == nil && (t.StudyID != studyID || !bytes.Equal(k, seqKey(t.Seq))) {
			err = fmt.Errorf("trial %s stored under study %s key %x", t.ID, studyID, k)
		}
		if err != nil {
			return &store.CorruptError{Path: s.path, Err: err}
		}
		return fn(t)
	})
}

// scanSummaries calls fn for each trial summary of a study in sequence order.
func (s *Store) scanSummaries(ctx context.Context, studyID string, fn func(*store.Summary) error) error {
	return s.scanSummariesFrom(ctx, studyID, 1, fn)
}

// scanSummariesFrom is scanSummaries from trial number from on.
func (s *Store) scanSummariesFrom(ctx context.Context, studyID string, from uint64, fn func(*store.Summary) error) error {
	return s.scanRaw(ctx, studyID, bucketSummaries, from, func(k, v []byte) error {
		sm, err := store.DecodeSealedSummary(studyID, v)
		if err == nil && !bytes.Equal(k, seqKey(sm.Seq)) {
			err = fmt.Errorf("summary %s stored under key %x", sm.ID(), k)
		}
		if err != nil {
			return &store.CorruptError{Path: s.path, Err: err}
		}
		return fn(&sm)
	})
}

// recoverInterrupted marks as interrupted the running trials whose writer
// session is gone. It returns the locks it took on dead sessions' files (to
// release, and the files to remove, after the commit).
func (s *Store) recoverInterrupted(tx *bolt.Tx) (locks []*fileLock, paths []string, marked int, err error) {
	type entry struct {
		studyID string
		seq     uint64
		session string
	}
	var running []entry
	err = tx.Bucket(bucketRunning).ForEach(func(k, v []byte) error {
		if len(k) != 12+8 {
			return corrupt(tx, fmt.Errorf("running index key %x", k))
		}
		running = append(running, entry{string(k[:12]), beUint64(k[12:]), string(v)})
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	dead := map[string]bool{}
	for _, e := range running {
		if e.session == s.session {
			continue
		}
		isDead, seen := dead[e.session]
		if !seen {
			p := s.sessionPath(e.session)
			l, exists, err := tryLockExisting(p)
			if err != nil && !os.IsNotExist(err) {
				return locks, paths, 0, fmt.Errorf("session %s: %w", e.session, err)
			}
			isDead = l != nil || !exists
			if l != nil {
				locks, paths = append(locks, l), append(paths, p)
			}
			dead[e.session] = isDead
		}
		if !isDead {
			continue
		}
		t, err := getTrial(tx, e.studyID, e.seq)
		if err != nil {
			return locks, paths, 0, err
		}
		if err := interruptTx(tx, &t, "the writing process died", s.opts.Now().UTC()); err != nil {
			return locks, paths, 0, err
		}
		s.log.Warn("trial interrupted by a dead process", "trial", t.ID, "session", e.session)
		marked++
	}
	return locks, paths, marked, nil
}
