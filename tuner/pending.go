package tuner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/internal/atomicfile"
	"github.com/vllm-tuner/tuner/store"
)

// A shared study's worker keeps a trial's result on disk while the database
// cannot take it (Config.SpoolDir, one file per trial: the store.Trial as
// JSON). The file is written whole (a temporary file renamed into place),
// readable by its owner only, and stored by the next start of a worker of
// the study (tuner worker, or search --resume), then removed.

// keepPending writes rec into dir and returns the file's path.
func keepPending(dir string, rec store.Trial) (string, error) {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, rec.ID+".json")
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// StorePending stores the results a worker kept in dir for study: each
// one finishes its trial; a trial taken back meanwhile is claimed again
// for worker and finished with the kept result, unless its config was
// measured meanwhile or the study's search budget is used up (then the
// result is dropped with a warning). Stored and dropped files are removed;
// it returns how many results it stored.
func StorePending(ctx context.Context, db store.DB, study, dir, worker string, lease time.Duration, maxSearch int, log *slog.Logger) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	stored := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return stored, err
		}
		var rec store.Trial
		if err := json.Unmarshal(b, &rec); err != nil || rec.ID == "" || rec.Result == nil {
			log.Warn("dropping an unreadable kept result", "file", path, "err", err)
			os.Remove(path)
			continue
		}
		_, err = db.FinishTrial(ctx, rec.ID, rec.Result)
		if errors.Is(err, store.ErrState) || errors.Is(err, store.ErrNotFound) {
			var t store.Trial
			t, err = db.ClaimTrial(ctx, study, rec.Config, store.ClaimOptions{Repeat: rec.Repeat, Worker: worker, Lease: lease, MaxSearch: maxSearch})
			if err == nil {
				_, err = db.FinishTrial(ctx, t.ID, rec.Result)
			}
		}
		switch {
		case errors.Is(err, store.ErrClaimed), errors.Is(err, store.ErrTrialBudget):
			log.Warn("dropping a kept result: its config was measured meanwhile or the study's budget is used up", "trial", rec.ID, "err", err)
		case err != nil:
			return stored, fmt.Errorf("store the result kept in %s: %w", path, err)
		default:
			stored++
			log.Info("stored a result kept while the database was away", "trial", rec.ID)
		}
		os.Remove(path)
	}
	return stored, nil
}
