package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
)

// LockStudy takes the study's lock without waiting; a held lock is an
// error matching store.ErrStudyLocked.
func (s *Store) LockStudy(ctx context.Context, studyID string) (*store.StudyLock, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if s.cfg.ReadOnly {
		return nil, store.ErrReadOnly
	}
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil, s.connectErr(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", int32(classStudy), lockKey(studyID)).Scan(&ok); err != nil {
		conn.Close(ctx)
		return nil, s.wrap("lock study "+studyID, err)
	}
	if !ok {
		conn.Close(ctx)
		return nil, fmt.Errorf("study %s on %s: another search holds it: %w", studyID, s.where, store.ErrStudyLocked)
	}
	return store.NewStudyLock(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return conn.Close(ctx)
	}, nil), nil
}
