package trial

import (
	"bytes"
	"compress/gzip"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestRawRoundTrip(t *testing.T) {
	l0 := synth(50, 5*time.Millisecond, 7, func(int) float64 { return 80 }, 1)
	l0[3].Err, l0[3].Chunks, l0[3].End = "http 500: x", nil, msd(2)
	l0[0].Warmup = true
	l1 := synth(20, 5*time.Millisecond, 3, func(int) float64 { return 40 }, 2)
	path := filepath.Join(t.TempDir(), "raw.jsonl.gz")
	h := RawHeader{ConfigID: "abc", Workload: "w", Levels: []RawLevel{{Concurrency: 4, Records: l0}, {Concurrency: 8, Records: l1}}}
	if err := WriteRaw(path, h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.ConfigID != "abc" || len(got.Levels) != 2 || got.Levels[1].Concurrency != 8 {
		t.Fatalf("header = %+v", got)
	}
	for li, want := range [][]Record{l0, l1} {
		if !reflect.DeepEqual(got.Levels[li].Records, want) {
			t.Errorf("level %d records differ", li)
		}
		// Metrics recomputed from the file are the same.
		if a, b := Summarize(got.Levels[li].Records, nil), Summarize(want, nil); !reflect.DeepEqual(a, b) {
			t.Errorf("level %d metrics differ", li)
		}
	}
}

func TestRawRejects(t *testing.T) {
	if _, err := DecodeRaw(bytes.NewReader([]byte("plain"))); err == nil {
		t.Error("non-gzip accepted")
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(`{"version":1,"levels":[{}]}` + "\n" + `{"l":3}` + "\n"))
	zw.Close()
	if _, err := DecodeRaw(&buf); err == nil {
		t.Error("bad level accepted")
	}
}
