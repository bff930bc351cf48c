package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
)

// StudyLock is one search's exclusive right to run trials in a study (as
// store.StudyLock for a file): a session-level advisory lock on a
// connection of its own, released by Unlock or by the server when the
// process or its connection dies.
type StudyLock struct {
	conn *pgx.Conn
}

// LockStudy takes the study's lock without waiting; a held lock is an
// error matching store.ErrStudyLocked.
func (s *Store) LockStudy(ctx context.Context, studyID string) (*StudyLock, error) {
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
	return &StudyLock{conn: conn}, nil
}

// Unlock releases the lock (closing its connection).
func (l *StudyLock) Unlock() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.conn.Close(ctx)
}
