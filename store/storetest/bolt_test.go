package storetest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
)

// BoltOpener opens a bbolt store in a test's temp dir.
func boltOpener(t *testing.T, now func() time.Time) func() storetest.Backend {
	path := filepath.Join(t.TempDir(), "tuner.db")
	return func() storetest.Backend {
		s, err := store.Open(context.Background(), path, store.Options{Timeout: 5 * time.Second, NoSync: true, Now: now, MinFreeBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestBolt(t *testing.T) { storetest.Run(t, boltOpener) }
