package trial

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// staleFile records the running engine's process group in the log dir, so
// that a tuner killed without a chance to clean up (SIGKILL, OOM killer)
// can reap what Pdeathsig does not reach (the engine's own children) when
// it starts again.
const staleFile = ".engine.pgid"

func writeStale(dir string, pgid int) {
	s := fmt.Sprintf("%d %d\n", pgid, procStartTime(pgid))
	_ = os.WriteFile(filepath.Join(dir, staleFile), []byte(s), 0o644)
}

func clearStale(dir string) { _ = os.Remove(filepath.Join(dir, staleFile)) }

// reapStale kills what is left of an engine recorded by a previous runner
// over the same log dir: members of its process group started no earlier
// than its leader (so a reused group id is left alone).
func reapStale(dir string, log *slog.Logger) []int {
	b, err := os.ReadFile(filepath.Join(dir, staleFile))
	if err != nil {
		return nil
	}
	defer clearStale(dir)
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return nil
	}
	pgid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pgid <= 1 || pgid == syscall.Getpgrp() {
		return nil
	}
	var killed []int
	for _, pid := range GroupMembers(pgid) {
		if st := procStartTime(pid); st != 0 && st >= start {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	if len(killed) > 0 {
		log.Warn("killed processes left by a previous engine", "pgid", pgid, "pids", killed)
	}
	return killed
}
