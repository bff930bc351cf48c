package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FuzzDecodeTrial feeds arbitrary bytes to the record decoders: they must
// return a record or an error, never panic, and a decoded trial must survive
// a re-encode/decode round trip unchanged.
func FuzzDecodeTrial(f *testing.F) {
	r := rand.New(rand.NewPCG(50, 51))
	cfg := storetest.Config(r)
	good := store.Trial{V: 1, ID: "0123456789ab-3", StudyID: "0123456789ab", Seq: 3, State: store.StateOK,
		ConfigID: cfg.ID(), Config: cfg, Result: storetest.ResultOneIn(r, cfg, 20)}
	raw, _ := json.Marshal(good)
	f.Add(raw)
	f.Add([]byte(`{"id":"0123456789ab-1","study_id":"0123456789ab","seq":1,"status":"running","config":{},"config_hash":"x"}`))
	f.Add([]byte(`{"v":2,"id":"0123456789ab-1"}`))
	f.Add([]byte(`{"v":1,"config":{"a":1.5e400}}`))
	f.Add([]byte(`{"v":1} {}`))
	f.Add([]byte(`{"v":1,"id":"x","key":{"objectives":[{"name":"a","direction":"max"}]},"points":[{"values":[1,2]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeStudy(b)
		_, _ = DecodeFront(b)
		_, _ = decodeModelMeta(b)
		if vecs, err := decodeVectors(b); err == nil && len(vecs) > 0 {
			if again := encodeVectors(vecs, len(vecs[0])); string(again) != string(b) {
				t.Fatalf("vector cache round trip changed the bytes")
			}
		}
		tr, err := DecodeTrial(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(tr)
		if err != nil {
			return // e.g. a config value JSON cannot carry back out
		}
		tr2, err := DecodeTrial(again)
		if err != nil {
			t.Fatalf("re-encoded trial does not decode: %v\n%s", err, again)
		}
		third, _ := json.Marshal(tr2)
		if string(third) != string(again) {
			t.Fatalf("round trip changed the record:\n%s\n%s", again, third)
		}
	})
}

// FuzzDecodeSummary: the binary summary decoder returns a summary or an
// error for any input, and what it accepts re-encodes to the same bytes.
func FuzzDecodeSummary(f *testing.F) {
	r := rand.New(rand.NewPCG(52, 53))
	for range 3 {
		cfg := storetest.Config(r)
		tr := store.Trial{V: 1, ID: "0123456789ab-9", StudyID: "0123456789ab", Seq: 9, State: store.StateOK, Config: cfg, Result: storetest.ResultOneIn(r, cfg, 20)}
		sm := store.Summarize(&tr)
		f.Add(store.EncodeSummary(&sm))
	}
	f.Add([]byte{1, 1, 7, 'r', 'u', 'n', 'n', 'i', 'n', 'g'})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		sm, err := store.DecodeSummary("0123456789ab", b)
		if err != nil {
			return
		}
		again := store.EncodeSummary(&sm)
		sm2, err := store.DecodeSummary("0123456789ab", again)
		if err != nil {
			t.Fatalf("re-encoded summary does not decode: %v", err)
		}
		if third := store.EncodeSummary(&sm2); string(third) != string(again) {
			t.Fatalf("round trip changed the summary")
		}
	})
}

// TestDecodeSummaryBoundedAlloc: a short record whose param count promises
// millions of params (the fuzzer's ~300-byte, ~4 GB find) is refused
// without sizing anything from that count.
func TestDecodeSummaryBoundedAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(54, 55))
	cfg := storetest.Config(r)
	tr := store.Trial{V: 1, ID: "0123456789ab-9", StudyID: "0123456789ab", Seq: 9, State: store.StateOK, Config: cfg, Result: storetest.ResultOneIn(r, cfg, 20)}
	sm := store.Summarize(&tr)
	sm.Config = spaces.NewConfig(nil)
	good := store.EncodeSummary(&sm)
	// The record ends with the param count (0 here): replace it with a
	// huge one followed by a few bytes of padding.
	for _, n := range []uint64{1 << 22, 1 << 40} {
		bad := binary.AppendUvarint(bytes.Clone(good[:len(good)-1]), n)
		bad = append(bad, make([]byte, 64)...)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := store.DecodeSummary("0123456789ab", bad)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("count %d: decoded", n)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Errorf("count %d in a %d-byte record: decoding allocated %d bytes", n, len(bad), got)
		}
	}
}

// FuzzParseMeta: the meta page parser returns a meta or an error for any
// input; what it accepts has a valid page size.
func FuzzParseMeta(f *testing.F) {
	f.Add(make([]byte, 80))
	f.Add([]byte{})
	path := filepath.Join(f.TempDir(), "t.db")
	s, err := Open(context.Background(), path, Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	s.Close()
	if raw, err := os.ReadFile(path); err == nil {
		f.Add(raw[:80])
		if m, err := parseMeta(raw); err != nil || int(m.pageSize) > len(raw) {
			f.Fatalf("a new file's meta page: %v", err)
		} else {
			f.Add(raw[m.pageSize : m.pageSize+80])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeta(b)
		if err == nil && (m.pageSize < 1024 || m.pageSize&(m.pageSize-1) != 0) {
			t.Fatalf("accepted page size %d", m.pageSize)
		}
	})
}

// FuzzUnseal: the record envelope returns the payload or an error for any
// input, never panics, and any sealed payload comes back unchanged.
func FuzzUnseal(f *testing.F) {
	f.Add([]byte(`{"v":2}`))
	f.Add(store.Seal([]byte(`{"v":2}`)))
	f.Add([]byte{store.SealMagic, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = store.Unseal(b, false)
		_, _ = store.Unseal(b, true)
		p, err := store.Unseal(store.Seal(b), false)
		if err != nil || !bytes.Equal(p, b) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzWalkPages: the page walker reports problems for any file image and
// never panics or runs away; a real file has none.
func FuzzWalkPages(f *testing.F) {
	path, _ := filledDB(f, 40)
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if p := walkPages(raw, 10); len(p) != 0 {
		f.Fatalf("a real file: %v", p)
	}
	f.Add(raw, uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, b []byte, at uint16, x byte) {
		if len(b) > 0 {
			b[int(at)%len(b)] ^= x
		}
		_ = walkPages(b, 10)
	})
}
