package boltstore

import (
	"bytes"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"log/slog"
	"strconv"
	"time"
)

// SchemaVersion is the layout this package writes (see the package doc).
//
// History:
//
//	0  buckets studies and trials only, no meta; trial records without "v",
//	   with "status" and "config_hash"; no fronts, no running index.
//	1  meta, running index, maintained fronts, surrogate models.
//	2  every record sealed in a checksummed envelope (RecordVersion 2);
//	   every study has its trials and summaries buckets from its creation;
//	   the studies bucket's sequence counts the studies.
//	3  summaries of version 2 (what the list views read: end time,
//	   worker, request counts, ...).
const SchemaVersion = 3

var (
	bucketMeta      = []byte("meta")
	bucketStudies   = []byte("studies")
	bucketTrials    = []byte("trials")
	bucketRunning   = []byte("running")
	bucketFronts    = []byte("fronts")
	bucketModels    = []byte("models")
	bucketModelMeta = []byte("model_meta")
	bucketSummaries = []byte("summaries")
	bucketFrontVecs = []byte("front_vectors")

	keySchema  = []byte("schema")
	keyCreated = []byte("created")
)

var allBuckets = [][]byte{bucketMeta, bucketStudies, bucketTrials, bucketSummaries, bucketRunning, bucketFronts, bucketFrontVecs, bucketModels, bucketModelMeta}

// initSchema lays out an empty current-schema database.
func initSchema(tx *bolt.Tx, now time.Time) error {
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(keyCreated, []byte(now.UTC().Format(time.RFC3339))); err != nil {
		return err
	}
	return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
}

// schemaVersion reads the file's schema: the meta record, or 0 for a file
// with a studies bucket but no meta. An empty file (no buckets) is an error.
func schemaVersion(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(bucketStudies) != nil {
			return 0, nil
		}
		return 0, &store.CorruptError{Path: tx.DB().Path(), Err: fmt.Errorf("no meta bucket: not a tuner database")}
	}
	raw := meta.Get(keySchema)
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 0 {
		return 0, &store.CorruptError{Path: tx.DB().Path(), Err: fmt.Errorf("bad schema version %q", raw)}
	}
	if v > SchemaVersion {
		return v, fmt.Errorf("schema %d (this tuner knows %d): %w", v, SchemaVersion, store.ErrTooNew)
	}
	return v, nil
}

// migration upgrades a file from schema from to from+1 inside one transaction.
type migration struct {
	from int
	name string
	run  func(tx *bolt.Tx, now time.Time) error
}

var migrations = []migration{
	{from: 0, name: "versioned records, running index, maintained fronts, models", run: migrate0to1},
	{from: 1, name: "checksummed records, a trials bucket per study, study count", run: migrate1to2},
	{from: 2, name: "summaries for the list views", run: migrate2to3},
}

// migrate brings the file to SchemaVersion; all steps commit together with
// the caller's transaction or not at all.
func migrate(tx *bolt.Tx, now time.Time, log *slog.Logger) error {
	v, err := schemaVersion(tx)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if m.from != v {
			continue
		}
		log.Info("migrating database", "path", tx.DB().Path(), "from", m.from, "to", m.from+1, "step", m.name)
		if err := m.run(tx, now); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", m.from, m.from+1, err)
		}
		v = m.from + 1
		if err := tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(v))); err != nil {
			return err
		}
	}
	if v != SchemaVersion {
		return fmt.Errorf("no migration from schema %d", v)
	}
	return nil
}

// migrate0to1 re-encodes studies and trials as version-1 records (running
// trials of schema 0 become interrupted), creates the new buckets and
// builds every front from the trials.
func migrate0to1(tx *bolt.Tx, now time.Time) error {
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketMeta).Put(keyCreated, []byte(now.UTC().Format(time.RFC3339))); err != nil {
		return err
	}
	studies := tx.Bucket(bucketStudies)
	var all []store.Study
	err := studies.ForEach(func(k, v []byte) error {
		s, err := DecodeStudy(v)
		if err != nil {
			return err
		}
		all = append(all, s)
		return nil
	})
	if err != nil {
		return err
	}
	for _, s := range all {
		if err := putJSON(studies, []byte(s.ID), s); err != nil {
			return err
		}
		tb := tx.Bucket(bucketTrials).Bucket([]byte(s.ID))
		if tb == nil {
			continue
		}
		var ts []store.Trial
		if err := tb.ForEach(func(k, v []byte) error {
			t, err := DecodeTrial(v)
			if err != nil {
				return err
			}
			ts = append(ts, t)
			return nil
		}); err != nil {
			return err
		}
		var last uint64
		for _, t := range ts {
			if err := putTrial(tx, &t); err != nil {
				return err
			}
			last = max(last, t.Seq)
		}
		if tb.Sequence() < last {
			if err := tb.SetSequence(last); err != nil {
				return err
			}
		}
	}
	// Rebuilding the fronts reads the studies as schema 2 does, count included.
	if err := studies.SetSequence(uint64(len(all))); err != nil {
		return err
	}
	return rebuildAllFronts(tx)
}

// migrate1to2 seals every record (studies, trials and their summaries,
// fronts and their vector caches, model metadata), creates the trials and
// summaries buckets of studies without trials (so that a missing bucket is
// damage, never a study without trials) and sets the studies count.
func migrate1to2(tx *bolt.Tx, _ time.Time) error {
	studies := tx.Bucket(bucketStudies)
	var all []store.Study
	if err := studies.ForEach(func(k, v []byte) error {
		s, err := DecodeStudy(v)
		if err != nil {
			return fmt.Errorf("study %q: %w", k, err)
		}
		all = append(all, s)
		return nil
	}); err != nil {
		return err
	}
	for _, s := range all {
		if err := putJSON(studies, []byte(s.ID), s); err != nil {
			return err
		}
		if _, err := tx.Bucket(bucketSummaries).CreateBucketIfNotExists([]byte(s.ID)); err != nil {
			return err
		}
		tb, err := tx.Bucket(bucketTrials).CreateBucketIfNotExists([]byte(s.ID))
		if err != nil {
			return err
		}
		var ts []store.Trial
		if err := tb.ForEach(func(k, v []byte) error {
			t, err := DecodeTrial(v)
			if err != nil {
				return fmt.Errorf("trial %x of study %s: %w", k, s.ID, err)
			}
			ts = append(ts, t)
			return nil
		}); err != nil {
			return err
		}
		for _, t := range ts {
			t.V = store.RecordVersion
			if err := putTrial(tx, &t); err != nil {
				return err
			}
		}
	}
	if err := studies.SetSequence(uint64(len(all))); err != nil {
		return err
	}
	metas := tx.Bucket(bucketModelMeta)
	var names [][]byte
	var models []store.ModelMeta
	if err := metas.ForEach(func(k, v []byte) error {
		var m store.ModelMeta
		if err := store.DecodeAny(v, &m); err != nil {
			return fmt.Errorf("model %q: %w", k, err)
		}
		m.V = store.RecordVersion
		names, models = append(names, bytes.Clone(k)), append(models, m)
		return nil
	}); err != nil {
		return err
	}
	for i, m := range models {
		if err := putJSON(metas, names[i], m); err != nil {
			return err
		}
	}
	return rebuildAllFronts(tx)
}

// migrate2to3 rewrites every trial's summary from its record.
func migrate2to3(tx *bolt.Tx, _ time.Time) error {
	return tx.Bucket(bucketTrials).ForEachBucket(func(study []byte) error {
		return tx.Bucket(bucketTrials).Bucket(study).ForEach(func(k, v []byte) error {
			t, err := decodeTrial(v, false)
			if err != nil {
				return fmt.Errorf("trial %x of study %s: %w", k, study, err)
			}
			return putSummary(tx, &t)
		})
	})
}
