package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// Several workers on one machine's file (tuner worker): each trial is a
// lease, as in store/pgstore. Created on first use, so older files need no
// migration:
//
//	workers      study ID + "/" + worker name -> workerRec JSON (sealed)
//	leases       study ID + 8-byte big-endian sequence -> leaseRec JSON
//	             (sealed): the worker running the trial and until when
//	study_specs  study ID -> the spec the study's first worker recorded
//
// Lease times are this machine's wall clock (as PostgreSQL uses its
// server's), not Options.Now, the clock of record timestamps.
var (
	bucketWorkers = []byte("workers")
	bucketLeases  = []byte("leases")
	bucketSpecs   = []byte("study_specs")
)

type workerRec struct {
	Joined time.Time `json:"joined"`
	Until  time.Time `json:"until"`
}

type leaseRec struct {
	Worker string    `json:"worker"`
	Until  time.Time `json:"until"`
}

func workerKey(studyID, worker string) []byte { return []byte(studyID + "/" + worker) }

// leaseBuckets returns the lease buckets, creating them.
func leaseBuckets(tx *bolt.Tx) (workers, leases *bolt.Bucket, err error) {
	if workers, err = tx.CreateBucketIfNotExists(bucketWorkers); err != nil {
		return nil, nil, err
	}
	leases, err = tx.CreateBucketIfNotExists(bucketLeases)
	return workers, leases, err
}

// JoinStudy: see store.DB. Others counts the other live workers and the
// workers holding an unexpired trial lease (a worker busy with a long trial
// may have let its membership lapse; it is live all the same).
func (s *Store) JoinStudy(ctx context.Context, studyID, worker string, lease time.Duration, spec []byte) (store.Membership, error) {
	var m store.Membership
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if _, err := getStudy(tx, studyID); err != nil {
			return err
		}
		wb, lb, err := leaseBuckets(tx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		prefix := []byte(studyID + "/")
		live := map[string]time.Time{} // worker -> joined
		c := wb.Cursor()
		var expired [][]byte
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var w workerRec
			if err := store.DecodeStrict(v, &w); err != nil {
				return corrupt(tx, fmt.Errorf("worker %s: %w", k, err))
			}
			if w.Until.Before(now) {
				expired = append(expired, bytes.Clone(k))
				continue
			}
			live[string(k[len(prefix):])] = w.Joined
		}
		for _, k := range expired {
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
		if _, ok := live[worker]; ok {
			return fmt.Errorf("worker %q of study %s: %w", worker, studyID, store.ErrWorkerName)
		}
		if err := putJSON(wb, workerKey(studyID, worker), workerRec{Joined: now, Until: now.Add(lease)}); err != nil {
			return err
		}
		if spec != nil {
			sb, err := tx.CreateBucketIfNotExists(bucketSpecs)
			if err != nil {
				return err
			}
			if sb.Get([]byte(studyID)) == nil {
				if err := sb.Put([]byte(studyID), store.Seal(spec)); err != nil {
					return err
				}
			}
		}
		others := map[string]bool{}
		earliest := now
		for name, joined := range live {
			others[name] = true
			if joined.Before(earliest) {
				earliest = joined
			}
		}
		err = forLeases(tx, lb, studyID, func(_ []byte, l leaseRec) error {
			if !l.Until.Before(now) && l.Worker != worker {
				others[l.Worker] = true
			}
			return nil
		})
		m = store.Membership{Elapsed: now.Sub(earliest), Others: len(others)}
		if tb := tx.Bucket(bucketTrials).Bucket([]byte(studyID)); tb != nil {
			k, _ := tb.Cursor().First()
			m.HadTrials = k != nil
		}
		return err
	})
	if err != nil {
		return store.Membership{}, fmt.Errorf("join study %s: %w", studyID, err)
	}
	return m, nil
}

// forLeases calls fn with each lease of the study (key, record).
func forLeases(tx *bolt.Tx, lb *bolt.Bucket, studyID string, fn func(k []byte, l leaseRec) error) error {
	prefix := []byte(studyID)
	c := lb.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var l leaseRec
		if err := store.DecodeStrict(v, &l); err != nil {
			return corrupt(tx, fmt.Errorf("lease %x: %w", k, err))
		}
		if err := fn(bytes.Clone(k), l); err != nil {
			return err
		}
	}
	return nil
}

// LeaveStudy: see store.DB.
func (s *Store) LeaveStudy(ctx context.Context, studyID, worker string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketWorkers); b != nil {
			return b.Delete(workerKey(studyID, worker))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("leave study %s: %w", studyID, err)
	}
	return nil
}

// StudySpec: see store.DB.
func (s *Store) StudySpec(ctx context.Context, studyID string) ([]byte, error) {
	var spec []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if _, err := getStudy(tx, studyID); err != nil {
			return err
		}
		var raw []byte
		if b := tx.Bucket(bucketSpecs); b != nil {
			raw = b.Get([]byte(studyID))
		}
		if raw == nil {
			return fmt.Errorf("study %s has no recorded spec (no worker joined it): %w", studyID, store.ErrNotFound)
		}
		p, err := store.Unseal(raw, false)
		spec = bytes.Clone(p)
		return err
	})
	return spec, err
}

// ClaimTrial: see store.DB.
func (s *Store) ClaimTrial(ctx context.Context, studyID string, cfg spaces.Config, o store.ClaimOptions) (store.Trial, error) {
	t, err := o.Trial(studyID, cfg, s.opts.Now(), s.session)
	if err != nil {
		return store.Trial{}, err
	}
	if err := s.checkFree(); err != nil {
		return store.Trial{}, fmt.Errorf("claim trial in study %s: %w", studyID, err)
	}
	now := time.Now().UTC()
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if _, err := getStudy(tx, studyID); err != nil {
			return err
		}
		searches := 0
		sb := tx.Bucket(bucketSummaries).Bucket([]byte(studyID))
		if sb != nil {
			err := sb.ForEach(func(k, v []byte) error {
				sm, err := store.DecodeSealedSummary(studyID, v)
				if err != nil {
					return corrupt(tx, err)
				}
				if sm.State == store.StateInterrupted {
					return nil
				}
				if sm.Repeat == 0 {
					searches++
				}
				if sm.ConfigID == t.ConfigID && sm.Repeat == o.Repeat {
					return fmt.Errorf("config %s repeat %d: trial %s: %w", t.ConfigID, o.Repeat, sm.ID(), store.ErrClaimed)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if o.MaxSearch > 0 && o.Repeat == 0 && searches >= o.MaxSearch {
			return fmt.Errorf("%d of %d search trials: %w", searches, o.MaxSearch, store.ErrTrialBudget)
		}
		if err := beginTrialTx(tx, &t); err != nil {
			return err
		}
		_, lb, err := leaseBuckets(tx)
		if err != nil {
			return err
		}
		return putJSON(lb, runningKey(studyID, t.Seq), leaseRec{Worker: o.Worker, Until: now.Add(o.Lease)})
	})
	if err != nil {
		return store.Trial{}, fmt.Errorf("claim trial in study %s: %w", studyID, err)
	}
	return t, nil
}

// Heartbeat: see store.DB.
func (s *Store) Heartbeat(ctx context.Context, studyID, worker, trialID string, lease time.Duration) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		wb, lb, err := leaseBuckets(tx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		w := workerRec{Joined: now}
		if raw := wb.Get(workerKey(studyID, worker)); raw != nil {
			if err := store.DecodeStrict(raw, &w); err != nil {
				return corrupt(tx, err)
			}
		} // else pruned while this worker was away: join again
		w.Until = now.Add(lease)
		if err := putJSON(wb, workerKey(studyID, worker), w); err != nil {
			return err
		}
		if trialID == "" {
			return nil
		}
		sid, seq, err := store.ParseTrialID(trialID)
		if err != nil {
			return err
		}
		var l leaseRec
		raw := lb.Get(runningKey(sid, seq))
		if raw != nil {
			if err := store.DecodeStrict(raw, &l); err != nil {
				return corrupt(tx, err)
			}
		}
		if raw == nil || l.Worker != worker {
			return fmt.Errorf("trial %s: %w", trialID, store.ErrLeaseLost)
		}
		l.Until = now.Add(lease)
		return putJSON(lb, runningKey(sid, seq), l)
	})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// ReapExpired: see store.DB.
func (s *Store) ReapExpired(ctx context.Context, studyID string) ([]store.Trial, error) {
	var out []store.Trial
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out = nil
		lb := tx.Bucket(bucketLeases)
		if lb == nil {
			return errNoChange
		}
		now := time.Now().UTC()
		var expired [][]byte
		if err := forLeases(tx, lb, studyID, func(k []byte, l leaseRec) error {
			if l.Until.Before(now) {
				expired = append(expired, k)
			}
			return nil
		}); err != nil {
			return err
		}
		if len(expired) == 0 {
			return errNoChange
		}
		for _, k := range expired {
			seq := beUint64(k[len(k)-8:])
			t, err := getTrial(tx, studyID, seq)
			if err != nil {
				return err
			}
			if err := lb.Delete(k); err != nil {
				return err
			}
			if t.State != store.StateRunning {
				continue
			}
			if err := interruptTx(tx, &t, "the lease of worker "+t.Worker+" expired", s.opts.Now().UTC()); err != nil {
				return err
			}
			s.log.Warn("trial lease expired", "trial", t.ID, "worker", t.Worker)
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reap expired leases: %w", err)
	}
	return out, nil
}

// interruptTx marks a running trial interrupted with a note saying why.
func interruptTx(tx *bolt.Tx, t *store.Trial, why string, now time.Time) error {
	t.State = store.StateInterrupted
	t.Ended = now
	if t.Notes != "" {
		t.Notes += "; "
	}
	t.Notes += "interrupted: " + why
	if err := putTrial(tx, t); err != nil {
		return err
	}
	if b := tx.Bucket(bucketLeases); b != nil {
		if err := b.Delete(runningKey(t.StudyID, t.Seq)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketRunning).Delete(runningKey(t.StudyID, t.Seq))
}

// Migrate: see store.DB. Opening for writing migrated the file already.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	if s.opts.ReadOnly {
		return 0, store.ErrReadOnly
	}
	return SchemaVersion, nil
}

// Summaries: see store.DB.
func (s *Store) Summaries(ctx context.Context, studyID string, f store.TrialFilter) ([]store.Summary, error) {
	var out []store.Summary
	err := s.scanSummariesFrom(ctx, studyID, f.FromSeq, func(sm *store.Summary) error {
		if f.MatchSummary(sm) {
			out = append(out, *sm)
		}
		return nil
	})
	return out, err
}

var _ store.DB = (*Store)(nil)
