package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDecodeRecord: a record decodes sealed (and, legacy, plain); one
// newer than this program is ErrTooNew naming its key; a bad one names
// the record. Nothing is returned with an error.
func TestDecodeRecord(t *testing.T) {
	plain := func(v any) []byte {
		b, err := MarshalRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sealed := func(v any) []byte { return Seal(plain(v)) }
	// got is what a decoded record says it is ("" for the zero record).
	type recorder interface{ record() (string, int, string) }
	got := func(r recorder, err error) (string, error) {
		if what, v, key := r.record(); v != 0 || key != "" {
			return fmt.Sprintf("%s %d %s", what, v, key), err
		}
		return "", err
	}
	cases := []struct {
		name    string
		decode  func() (string, error)
		want    string
		wantErr string
		tooNew  bool
	}{
		{name: "trial", decode: func() (string, error) {
			r, err := DecodeRecord[Trial](sealed(Trial{V: RecordVersion, ID: "s1/3"}), false)
			return got(&r, err)
		}, want: fmt.Sprintf("trial %d s1/3", RecordVersion)},
		{name: "job, plain, legacy", decode: func() (string, error) {
			r, err := UnmarshalJob(plain(Job{V: 1, ID: "job-1"}))
			return got(&r, err)
		}, want: "job 1 job-1"},
		{name: "study, plain, strict", decode: func() (string, error) {
			r, err := DecodeRecord[Study](plain(Study{V: 1, ID: "s1"}), false)
			return got(&r, err)
		}, wantErr: "decode study: "},
		{name: "front too new", decode: func() (string, error) {
			r, err := UnmarshalFront(sealed(Front{V: RecordVersion + 1, Key: "study/s1"}))
			return got(&r, err)
		}, wantErr: "decode front study/s1: record version", tooNew: true},
		{name: "model meta too new", decode: func() (string, error) {
			r, err := DecodeRecord[ModelMeta](sealed(ModelMeta{V: RecordVersion + 1, Name: "m"}), false)
			return got(&r, err)
		}, wantErr: "decode model meta m: record version", tooNew: true},
		{name: "schedule not json", decode: func() (string, error) {
			r, err := UnmarshalSchedule([]byte("{"))
			return got(&r, err)
		}, wantErr: "decode schedule: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := tc.decode()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q...", err, tc.wantErr)
			case errors.Is(err, ErrTooNew) != tc.tooNew:
				t.Errorf("err = %v, ErrTooNew %v", err, tc.tooNew)
			}
			if rec != tc.want {
				t.Errorf("decoded %q, want %q", rec, tc.want)
			}
		})
	}
}
