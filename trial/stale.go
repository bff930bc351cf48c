package trial

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A runner records each engine it starts in a small JSON file, in the log
// dir and in the per-user run dir, so that a later runner can reap what a
// tuner killed without a chance to clean up (SIGKILL, OOM killer) left
// behind. On Linux the engine's guard (guard_linux.go) kills every process
// of the engine when the tuner dies; the records cover a guard that was
// itself SIGKILLed (Pdeathsig then takes only the engine's leader, never the
// workers it forked into its group: vLLM's engine core and TP workers) and
// systems without a guard.
//
// The file is not trusted: a record is reaped only when
//   - it was written on this host and this boot,
//   - its owner (the tuner process, by pid and start time) is gone, and
//   - a process still in the recorded group started no earlier than the
//     engine and carries the record's marker in its environment
//     (engineMarkerEnv, a random value the tuner set when it started the
//     engine and every worker inherits).
//
// A forged record can name any pid and start time, but not put the marker
// into an unrelated process, so it never makes the reaper kill one. The
// marker replaces an exe/cmdline check: an engine wrapper script execs the
// engine (the exe changes), and vLLM's workers run other command lines.
const (
	recordPrefix    = ".engine-"
	recordSuffix    = ".json"
	engineMarkerEnv = "TUNER_ENGINE_ID"
)

// EngineRecord is what a runner writes about an engine it started.
type EngineRecord struct {
	PGID       int    `json:"pgid"`
	Start      uint64 `json:"start"` // engine leader's start, clock ticks since boot
	Marker     string `json:"marker"`
	Exe        string `json:"exe,omitempty"` // informational
	Log        string `json:"log,omitempty"`
	Owner      int    `json:"owner_pid"`
	OwnerStart uint64 `json:"owner_start"`
	Host       string `json:"host"`
	Boot       string `json:"boot_id,omitempty"`
}

// StaleEngine is a record found on disk with what /proc says about it now.
type StaleEngine struct {
	EngineRecord
	Path       string `json:"path"`        // the record file
	OwnerAlive bool   `json:"owner_alive"` // the tuner that started it still runs
	Live       []int  `json:"live"`        // processes of the engine still alive
}

// newMarker is a random engine marker.
func newMarker() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand documents a panic-free Read on Linux)
	return hex.EncodeToString(b)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// recordName is the record file of an engine group.
func recordName(pgid int) string { return recordPrefix + strconv.Itoa(pgid) + recordSuffix }

// writeRecord writes rec into each dir ("" skipped), mode 0600.
func writeRecord(rec EngineRecord, dirs ...string) {
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, recordName(rec.PGID))
		tmp := p + ".tmp"
		if os.WriteFile(tmp, append(b, '\n'), 0o600) == nil {
			_ = os.Rename(tmp, p)
		}
	}
}

// clearRecord removes the record of group pgid from each dir.
func clearRecord(pgid int, dirs ...string) {
	for _, d := range dirs {
		if d != "" {
			_ = os.Remove(filepath.Join(d, recordName(pgid)))
		}
	}
}

// readRecords lists the records in dir, and the record files that hold no
// record (torn or not ours: nothing in them can be verified, so nothing is
// reaped for them).
func readRecords(dir string) (out []StaleEngine, bad []string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	for _, ent := range ents {
		n := ent.Name()
		if !strings.HasPrefix(n, recordPrefix) || !strings.HasSuffix(n, recordSuffix) || !ent.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, n)
		b, err := os.ReadFile(p)
		if err != nil || len(b) > 64<<10 {
			continue
		}
		var s StaleEngine
		if json.Unmarshal(b, &s.EngineRecord) != nil || recordName(s.PGID) != n {
			bad = append(bad, p)
			continue
		}
		s.Path = p
		out = append(out, s)
	}
	return out, bad
}

// inspect fills what /proc says about s now; foreign reports a record of
// another host or boot (nothing here can be judged).
func (s *StaleEngine) inspect() (foreign bool) {
	if s.Host != hostname() || s.Boot != "" && bootID() != "" && s.Boot != bootID() {
		return true
	}
	s.OwnerAlive = s.Owner > 0 && s.OwnerStart != 0 && procStartTime(s.Owner) == s.OwnerStart
	s.Live = s.members()
	return false
}

// members lists the live processes of the recorded engine: in its group,
// started no earlier than its leader, with its marker in their environment.
func (s *StaleEngine) members() []int {
	if s.PGID <= 1 || s.Marker == "" || s.PGID == syscall.Getpgrp() {
		return nil
	}
	var out []int
	for _, pid := range GroupMembers(s.PGID) {
		if st := procStartTime(pid); st != 0 && st >= s.Start && procEnvHas(pid, engineMarkerEnv, s.Marker) {
			out = append(out, pid)
		}
	}
	return out
}

// StaleEngines lists the engine records in dirs (duplicates by group
// once) with their owner's state and the engine processes still alive;
// records of another host or boot are left out. It kills nothing.
func StaleEngines(dirs ...string) []StaleEngine {
	var out []StaleEngine
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		recs, _ := readRecords(d)
		for _, s := range recs {
			key := strconv.Itoa(s.PGID) + "/" + s.Marker
			if seen[key] || s.inspect() {
				continue
			}
			seen[key] = true
			out = append(out, s)
		}
	}
	return out
}

// ReapStale kills the engines recorded in dirs whose owner is gone (see the
// rules above) and removes their records; records of live owners are left
// alone. It returns the processes it killed.
func ReapStale(log *slog.Logger, dirs ...string) []int {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var killed []int
	for _, d := range dirs {
		if d == "" {
			continue
		}
		recs, bad := readRecords(d)
		for _, p := range bad {
			_ = os.Remove(p)
		}
		for _, s := range recs {
			if s.inspect() {
				continue
			}
			if s.OwnerAlive {
				continue // another search's live engine
			}
			var k []int
			for _, pid := range s.Live {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					k = append(k, pid)
				}
			}
			if len(k) > 0 {
				log.Warn("killed processes left by an engine whose tuner died", "pgid", s.PGID, "owner", s.Owner, "pids", k, "record", s.Path)
				killed = append(killed, k...)
			}
			_ = os.Remove(s.Path)
		}
	}
	return killed
}

// DefaultRunDir is the per-user directory where runners also keep their
// engine records, so that a runner over any log dir (another study, another
// database) reaps engines a killed tuner left: $XDG_RUNTIME_DIR/vllm-tuner,
// else <tmp>/vllm-tuner-<uid>. It is created 0700; "" when it cannot be
// made or is not a private directory of this user.
func DefaultRunDir() string {
	base := os.Getenv("XDG_RUNTIME_DIR")
	var d string
	if base != "" {
		d = filepath.Join(base, "vllm-tuner")
	} else {
		d = filepath.Join(os.TempDir(), fmt.Sprintf("vllm-tuner-%d", os.Getuid()))
	}
	if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
		return ""
	}
	if !privateDir(d) {
		return ""
	}
	return d
}
