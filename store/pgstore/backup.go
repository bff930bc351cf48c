package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/dbcopy"
)

// Backup writes the database as a new bbolt file at dst (see store.DB): a
// portable copy that `tuner db copy --from FILE --to URL` restores.
func (s *Store) Backup(ctx context.Context, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("backup: %s exists: %w", dst, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	b, err := boltstore.Open(ctx, dst, boltstore.Options{Now: s.cfg.Now, MinFreeBytes: -1})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = dbcopy.Copy(ctx, b, s)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	return nil
}
