package tuner

import (
	"context"

	"github.com/vllm-tuner/tuner/store/pgstore"
)

// PGDB is a PostgreSQL database (store/pgstore) as a SearchDB; Dir is
// where files beside the database go (engine logs).
type PGDB struct {
	*pgstore.Store
	Dir string
}

var _ SearchDB = PGDB{}

// LockStudy takes the study's advisory lock (a dead owner's lock is gone
// with its session, so there is never a stale one to report).
func (p PGDB) LockStudy(ctx context.Context, id string) (func() error, string, error) {
	l, err := p.Store.LockStudy(ctx, id)
	if err != nil {
		return nil, "", err
	}
	return l.Unlock, "", nil
}

// DataDir is Dir.
func (p PGDB) DataDir() string { return p.Dir }
