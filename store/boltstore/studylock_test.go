package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"github.com/vllm-tuner/tuner/trial"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLockStudy(t *testing.T) {
	ctx := context.Background()
	host, _ := os.Hostname()
	tests := []struct {
		name      string
		record    *store.LockOwner // written into the lock file before locking; nil = none
		wantErr   bool
		otherHost bool
		stale     bool
	}{
		{name: "free"},
		{name: "stale on this host", record: &store.LockOwner{PID: 999999, Host: host, Started: time.Unix(1e9, 0)}, stale: true},
		{name: "record from another host", record: &store.LockOwner{PID: 4242, Host: host + "-elsewhere", Started: time.Unix(1e9, 0)}, wantErr: true, otherHost: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "", false)
			st, err := s.EnsureStudy(ctx, testKey("m", "g", ""))
			if err != nil {
				t.Fatal(err)
			}
			if tc.record != nil {
				b, _ := json.Marshal(tc.record)
				if err := os.WriteFile(s.studyLockPath(st.ID), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			l, err := s.LockStudy(ctx, st.ID)
			var le *store.StudyLockedError
			if tc.wantErr {
				if !errors.As(err, &le) || !errors.Is(err, store.ErrStudyLocked) || le.OtherHost != tc.otherHost {
					t.Fatalf("got %v, want a StudyLockedError (other host %v)", err, tc.otherHost)
				}
				if !strings.Contains(err.Error(), "4242") || !strings.Contains(err.Error(), "remove "+s.studyLockPath(st.ID)) {
					t.Errorf("error does not name the owner and the file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (l.Stale != nil) != tc.stale {
				t.Errorf("stale = %v, want %v", l.Stale, tc.stale)
			}
			// A second search (another Store, as in another process) is refused
			// with an error naming this one.
			s2 := openTest(t, s.Path(), false)
			_, err = s2.LockStudy(ctx, st.ID)
			if !errors.As(err, &le) || le.Owner.PID != os.Getpid() || le.Owner.Host != host || le.OtherHost {
				t.Fatalf("second lock: got %v, want a StudyLockedError naming pid %d", err, os.Getpid())
			}
			if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
				t.Errorf("error does not name the pid: %v", err)
			}
			// Other studies are not locked.
			other, _ := s2.EnsureStudy(ctx, testKey("m2", "g", ""))
			l2, err := s2.LockStudy(ctx, other.ID)
			if err != nil {
				t.Fatalf("another study: %v", err)
			}
			l2.Unlock()
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(s.studyLockPath(st.ID)); !os.IsNotExist(err) {
				t.Errorf("lock file left after Unlock: %v", err)
			}
			l3, err := s2.LockStudy(ctx, st.ID)
			if err != nil || l3.Stale != nil {
				t.Fatalf("after unlock: %v (stale %v)", err, l3.Stale)
			}
			l3.Unlock()
		})
	}
}

// TestCheckReportsDuplicates: two searches at once measured a config twice;
// Check lists it (without calling the file damaged).
func TestCheckReportsDuplicates(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	st, _ := s.EnsureStudy(ctx, testKey("m", "g", ""))
	r := rand.New(rand.NewPCG(7, 8))
	first := runTrial(t, s, r, st.ID)
	runTrial(t, s, r, st.ID)
	rep, err := s.Check(ctx)
	if err != nil || len(rep.Duplicates) != 0 {
		t.Fatalf("clean file: %v, duplicates %v", err, rep.Duplicates)
	}
	// An interrupted trial of the same config, then its re-run: no duplicate.
	tr, _ := s.BeginTrial(ctx, st.ID, first.Config, store.BeginOptions{Repeat: 1})
	res := *first.Result
	res.Failure, res.Status = trial.FailInterrupted, trial.StatusFailed
	if _, err := s.FinishTrial(ctx, tr.ID, &res); err != nil {
		t.Fatal(err)
	}
	tr, _ = s.BeginTrial(ctx, st.ID, first.Config, store.BeginOptions{Repeat: 1})
	if _, err := s.FinishTrial(ctx, tr.ID, first.Result); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Check(ctx); err != nil || len(rep.Duplicates) != 0 {
		t.Fatalf("re-run of an interrupted repeat: %v, duplicates %v", err, rep.Duplicates)
	}
	dup, _ := s.BeginTrial(ctx, st.ID, first.Config, store.BeginOptions{})
	if _, err := s.FinishTrial(ctx, dup.ID, first.Result); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Check(ctx)
	if err != nil {
		t.Fatalf("duplicates are not damage: %v", err)
	}
	if len(rep.Duplicates) != 1 || !strings.Contains(rep.Duplicates[0], first.ID) || !strings.Contains(rep.Duplicates[0], dup.ID) {
		t.Fatalf("duplicates %q, want one naming %s and %s", rep.Duplicates, first.ID, dup.ID)
	}
}

// TestBeginTrialOnFullDisk: below the free-space floor BeginTrial fails
// naming the file and writes nothing, so repeated resumes on a full disk
// leave no running records behind.
func TestBeginTrialOnFullDisk(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	st, _ := s.EnsureStudy(ctx, testKey("m", "g", ""))
	full, err := Open(ctx, s.Path(), Options{Timeout: time.Second, MinFreeBytes: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for range 3 {
		_, err := full.BeginTrial(ctx, st.ID, storetest.Config(rand.New(rand.NewPCG(1, 2))), store.BeginOptions{})
		if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), s.Path()) {
			t.Fatalf("got %v, want ErrDiskFull naming %s", err, s.Path())
		}
	}
	if ts, err := s.Trials(ctx, st.ID, store.TrialFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("trials after refused begins: %d, %v", len(ts), err)
	}
	if _, err := s.BeginTrial(ctx, st.ID, storetest.Config(rand.New(rand.NewPCG(1, 2))), store.BeginOptions{}); err != nil {
		t.Fatalf("with the default floor: %v", err)
	}
}
