package boltstore

import (
	"bytes"
	"context"
	"errors"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// filledDB writes a database with some trials and returns its path.
func filledDB(t testing.TB, n int) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tuner.db")
	s := openTest(t, path, false)
	st, err := s.EnsureStudy(context.Background(), testKey("m", "g", ""))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(30, 31))
	for range n {
		runTrial(t, s, r, st.ID)
	}
	s.Close()
	return path, st.ID
}

// openAndCheck opens the file both ways and checks it, returning the first
// error; it must never panic.
func openAndCheck(path string) error {
	ctx := context.Background()
	var first error
	for _, ro := range []bool{true, false} {
		s, err := Open(ctx, path, Options{ReadOnly: ro, Timeout: time.Second})
		if err == nil {
			_, err = s.Check(ctx)
			s.Close()
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func TestCorruptFiles(t *testing.T) {
	path, _ := filledDB(t, 150)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(good) < 8*4096 {
		t.Fatalf("fixture too small: %d bytes", len(good))
	}
	r := rand.New(rand.NewPCG(32, 33))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(r.IntN(256))
	}
	recordAt := bytes.Index(good, []byte(`"study_id"`))
	var hwm int
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error { hwm = int(tx.Size()); return nil })
	db.Close()
	tests := []struct {
		name   string
		mutate func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"one page", func(b []byte) []byte { return b[:4096] }},
		{"truncated half", func(b []byte) []byte { return b[:len(b)/2] }},
		{"truncated below the high-water mark", func(b []byte) []byte { return b[:hwm-4096-100] }},
		{"garbage", func([]byte) []byte { return garbage }},
		{"both meta pages zeroed", func(b []byte) []byte {
			b = bytes.Clone(b)
			clear(b[:2*4096])
			return b
		}},
		{"record bytes", func(b []byte) []byte {
			b = bytes.Clone(b)
			copy(b[recordAt:], `"st#dy_id"`)
			return b
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.db")
			bad := tc.mutate(good)
			if err := os.WriteFile(p, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			err := openAndCheck(p)
			var ce *store.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || ce.Path != p {
				t.Fatalf("got %v, want a *CorruptError naming %s", err, p)
			}
			after, _ := os.ReadFile(p)
			if !bytes.Equal(after, bad) {
				t.Error("the damaged file was modified")
			}
		})
	}
}

// TestRandomPageDamage overwrites random data pages: whatever bbolt makes of
// it, opening and checking must end in an error or a clean check, never a
// panic or a crash.
func TestRandomPageDamage(t *testing.T) {
	path, _ := filledDB(t, 150)
	good, _ := os.ReadFile(path)
	pages := len(good) / 4096
	r := rand.New(rand.NewPCG(34, 35))
	detected := 0
	for i := range 40 {
		bad := bytes.Clone(good)
		for range 1 + r.IntN(3) {
			pg := 2 + r.IntN(pages-2)
			off := pg*4096 + r.IntN(4096-64)
			for j := range 16 + r.IntN(48) {
				bad[off+j] = byte(r.IntN(256))
			}
		}
		p := filepath.Join(t.TempDir(), "bad.db")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := openAndCheck(p); err != nil {
			detected++
			if !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("case %d: error %v is not ErrCorrupt", i, err)
			}
		}
	}
	t.Logf("%d of 40 random damages detected (the rest hit free or unused bytes)", detected)
	if detected == 0 {
		t.Error("no damage detected at all")
	}
}
