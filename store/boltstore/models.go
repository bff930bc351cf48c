package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
)

// PutModel stores (or replaces) a surrogate model file with its metadata in
// one transaction. Name, Size, SHA256 and V are set here; a zero Created is
// set to now.
func (s *Store) PutModel(ctx context.Context, name string, data []byte, meta store.ModelMeta) error {
	meta, err := store.NewModelMeta(name, data, meta, s.opts.Now())
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketModels).Put([]byte(name), data); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketModelMeta), []byte(name), meta)
	})
	if err != nil {
		return fmt.Errorf("put model %s: %w", name, err)
	}
	return nil
}

// GetModel returns a model file and its metadata; the checksum is verified.
func (s *Store) GetModel(ctx context.Context, name string) ([]byte, store.ModelMeta, error) {
	var data []byte
	var meta store.ModelMeta
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketModelMeta).Get([]byte(name))
		blob := tx.Bucket(bucketModels).Get([]byte(name))
		if raw == nil || blob == nil {
			return fmt.Errorf("model %s: %w", name, store.ErrNotFound)
		}
		var err error
		if meta, err = decodeModelMeta(raw); err != nil {
			return corrupt(tx, err)
		}
		data = bytes.Clone(blob)
		return nil
	})
	if err != nil {
		return nil, store.ModelMeta{}, err
	}
	if !meta.Matches(data) {
		return nil, store.ModelMeta{}, &store.CorruptError{Path: s.path, Err: fmt.Errorf("model %s: checksum mismatch", name)}
	}
	return data, meta, nil
}

// ListModels returns the metadata of every stored model, by name.
func (s *Store) ListModels(ctx context.Context) ([]store.ModelMeta, error) {
	return list(ctx, s, bucketModelMeta, decodeModelMeta)
}

// DeleteModel removes a model; deleting a missing one is not an error.
func (s *Store) DeleteModel(ctx context.Context, name string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketModels).Delete([]byte(name)); err != nil {
			return err
		}
		return tx.Bucket(bucketModelMeta).Delete([]byte(name))
	})
}

func decodeModelMeta(b []byte) (store.ModelMeta, error) {
	return store.DecodeRecord[store.ModelMeta](b, false)
}
