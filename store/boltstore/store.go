package boltstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultTimeout is how long one operation waits for the file lock unless
// Options.Timeout says otherwise.
const DefaultTimeout = 10 * time.Second

// Options are the knobs of Open.
type Options struct {
	// ReadOnly opens for reading only: nothing is created, migrated or
	// recovered, and the file is locked shared (never blocking other readers).
	ReadOnly bool
	// Timeout bounds how long each operation waits for the file lock
	// (ErrBusy after it). Zero means DefaultTimeout; bbolt's "wait forever"
	// is never used.
	Timeout time.Duration
	// NoSync skips fsync on commit (tests and benchmarks only: a machine
	// crash may lose the latest commits, a process crash loses nothing).
	NoSync bool
	// Logger receives debug and recovery messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for record timestamps; nil means time.Now.
	Now func() time.Time
	// MinFreeBytes is the free space BeginTrial needs on the database's
	// file system (ErrDiskFull below it); 0 means DefaultMinFree, < 0 no
	// check.
	MinFreeBytes int64
}

// DefaultMinFree is twice bbolt's growth step (16 MiB): a trial that begins
// can also be finished, so a full disk stops a search before it leaves a
// running record behind (and a resume on it adds none).
const DefaultMinFree = 32 << 20

// DefaultOptions returns the options for a writing process.
func DefaultOptions() Options { return Options{Timeout: DefaultTimeout} }

// DefaultPath returns the default database file:
// $XDG_DATA_HOME/tuner/tuner.db, else $HOME/.local/share/tuner/tuner.db.
// getenv is usually os.Getenv.
func DefaultPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tuner", "tuner.db"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("default database path: %w", err)
		}
		home = h
	}
	return filepath.Join(home, ".local", "share", "tuner", "tuner.db"), nil
}

// Store is a handle on a database file. It holds no open file between
// operations (see the package documentation), so any number of Stores in
// any number of processes may share a file. Its methods are safe for
// concurrent use; do not call them from inside each other.
type Store struct {
	path string
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	closed  bool
	noGate  bool      // a private file (Check's copy): no gate file
	session string    // writer session ID ("" when read-only)
	slock   *fileLock // held for the Store's lifetime when writable
}

// Open returns a Store for the file at path. For writing it creates the file
// (and its directory) when missing, migrates an older schema, and marks as
// interrupted the running trials of writers that died. For reading the file
// must exist and have the current schema.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open store: empty path")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{path: abs, opts: opts, log: log}
	if opts.ReadOnly {
		err := s.view(ctx, func(tx *bolt.Tx) error {
			v, err := schemaVersion(tx)
			if err != nil {
				return err
			}
			if v < SchemaVersion {
				return fmt.Errorf("schema %d: %w", v, store.ErrNeedsMigration)
			}
			return nil
		})
		if err != nil {
			return nil, wrapOpen(abs, err)
		}
		return s, nil
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.createIfMissing(ctx); err != nil {
		return nil, wrapOpen(abs, err)
	}
	if err := s.acquireSession(ctx); err != nil {
		return nil, fmt.Errorf("open store %s: session lock: %w", abs, err)
	}
	var dead []*fileLock
	var deadPaths []string
	err = s.update(ctx, func(tx *bolt.Tx) error {
		v, err := schemaVersion(tx)
		if err != nil {
			return err
		}
		if v != SchemaVersion {
			if err := migrate(tx, s.opts.Now(), s.log); err != nil {
				return err
			}
		}
		var marked int
		dead, deadPaths, marked, err = s.recoverInterrupted(tx)
		if err == nil && v == SchemaVersion && marked == 0 {
			return errNoChange // roll back: opening a healthy file writes nothing
		}
		return err
	})
	for i, l := range dead {
		_ = os.Remove(deadPaths[i])
		_ = l.unlock()
	}
	if err != nil {
		s.Close()
		return nil, wrapOpen(abs, err)
	}
	s.cleanSessions()
	s.cleanTemporaries(time.Hour)
	return s, nil
}

// cleanTemporaries removes files that crashed processes left beside the
// database (half-built new files, Check's copies) once they are older than
// age, so that a live process's file is never taken away.
func (s *Store) cleanTemporaries(age time.Duration) {
	dir, base := filepath.Dir(s.path), filepath.Base(s.path)
	for _, pattern := range []string{base + ".new-*", "." + base + ".check-*"} {
		matches, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && time.Since(st.ModTime()) > age {
				s.log.Info("removing a stale temporary file", "path", m)
				_ = os.Remove(m)
			}
		}
	}
}

// wrapOpen names the file in an Open error unless the error already does.
func wrapOpen(path string, err error) error {
	var ce *store.CorruptError
	if errors.As(err, &ce) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrBusy) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

// ReadOnly reports whether the Store was opened read-only.
func (s *Store) ReadOnly() bool { return s.opts.ReadOnly }

// Close releases the writer session. The file itself is never held open.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.slock != nil {
		_ = os.Remove(s.sessionPath(s.session))
		return s.slock.unlock()
	}
	return nil
}

func (s *Store) gatePath() string   { return s.path + ".lock" }
func (s *Store) sessionDir() string { return s.path + ".sessions" }
func (s *Store) sessionPath(id string) string {
	return filepath.Join(s.sessionDir(), id+".lock")
}

// acquireSession creates and locks this writer's session file. It retries
// when the file was removed between create and lock (a concurrent cleanup
// took it for a dead session).
func (s *Store) acquireSession(ctx context.Context) error {
	if err := os.MkdirAll(s.sessionDir(), 0o700); err != nil {
		return err
	}
	for range 5 {
		id := store.RandomID()
		p := s.sessionPath(id)
		l, err := lockFile(ctx, p, true, time.Now().Add(s.opts.Timeout))
		if err != nil {
			return err
		}
		if sameFile(l, p) {
			s.session, s.slock = id, l
			return nil
		}
		_ = l.unlock()
	}
	return errors.New("session file keeps disappearing")
}

func sameFile(l *fileLock, path string) bool {
	if l.f == nil {
		return true
	}
	a, err1 := l.f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// cleanSessions removes session files whose writers are gone.
func (s *Store) cleanSessions() {
	entries, err := os.ReadDir(s.sessionDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(s.sessionDir(), e.Name())
		if p == s.sessionPath(s.session) || strings.HasPrefix(e.Name(), studyLockPrefix) {
			continue
		}
		if l, _, err := tryLockExisting(p); err == nil && l != nil {
			_ = os.Remove(p)
			_ = l.unlock()
		}
	}
}

// createIfMissing builds a new, initialised database beside path and links
// it into place, so a file at path is never half-initialised: an empty file
// there is damage, not a new database.
func (s *Store) createIfMissing(ctx context.Context) error {
	if _, err := os.Stat(s.path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp := s.path + ".new-" + store.RandomID()
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: s.opts.Timeout, NoSync: s.opts.NoSync})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return initSchema(tx, s.opts.Now()) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := os.Link(tmp, s.path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create: %w", err)
	}
	syncDir(filepath.Dir(s.path))
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// errNoChange, returned by an update body, rolls the transaction back
// without an error.
var errNoChange = errors.New("no change")

// getRecord decodes the record under key in bucket: none (or no bucket)
// is store.ErrNotFound naming what ("job ID"), one that does not decode
// marks the file corrupt.
func getRecord[T any](tx *bolt.Tx, bucket, key []byte, what string, decode func([]byte) (T, error)) (T, error) {
	var raw []byte
	if b := tx.Bucket(bucket); b != nil {
		raw = b.Get(key)
	}
	var zero T
	if raw == nil {
		return zero, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	r, err := decode(raw)
	if err != nil {
		return zero, corrupt(tx, err)
	}
	return r, nil
}

// list is every record of a bucket (none: nil) in key order, as decode
// reads it; a record it cannot read is damage to the file.
func list[T any](ctx context.Context, s *Store, bucket []byte, decode func([]byte) (T, error)) ([]T, error) {
	var out []T
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			r, err := decode(v)
			if err != nil {
				return corrupt(tx, err)
			}
			out = append(out, r) // decoding copies: v is not kept
			return nil
		})
	})
	return out, err
}

// view runs fn in one read-only transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	deadline, err := s.begin(ctx)
	if err != nil {
		return err
	}
	// Pass the gate: wait while a writer is queued, then let it go at once.
	// A reader never creates the gate file (a read-only command such as
	// search --dry-run leaves nothing behind): without one no writer waits.
	if _, err := os.Stat(s.gatePath()); err == nil && !s.noGate {
		g, err := lockFile(ctx, s.gatePath(), false, deadline)
		switch {
		case err == nil:
			_ = g.unlock()
		case errors.Is(err, store.ErrBusy) || ctx.Err() != nil:
			return err
		default:
			// No gate (e.g. a read-only directory): read without it.
		}
	}
	return s.withDB(deadline, true, 0, func(db *bolt.DB) error { return db.View(s.guard(db, fn)) })
}

// update runs fn in one read-write transaction.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.updateGrowing(ctx, 0, fn)
}

// updateGrowing is update for a transaction that writes about grow bytes:
// the file is mapped that much larger from the start, since bbolt remaps
// a growing file within a transaction by copying every page it touched
// (seconds for an import of a few hundred MB).
func (s *Store) updateGrowing(ctx context.Context, grow int64, fn func(tx *bolt.Tx) error) error {
	if s.opts.ReadOnly {
		return store.ErrReadOnly
	}
	deadline, err := s.begin(ctx)
	if err != nil {
		return err
	}
	g, err := lockFile(ctx, s.gatePath(), true, deadline)
	if err != nil {
		return fmt.Errorf("gate %s: %w", s.gatePath(), err)
	}
	defer g.unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	err = s.withDB(deadline, false, grow, func(db *bolt.DB) error { return db.Update(s.guard(db, fn)) })
	if errors.Is(err, errNoChange) {
		return nil
	}
	return s.nameFile(err)
}

func (s *Store) begin(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return time.Time{}, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Now().Add(s.opts.Timeout), nil
}

// guard wraps a transaction body with the truncation and meta page checks.
func (s *Store) guard(db *bolt.DB, fn func(tx *bolt.Tx) error) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		st, err := os.Stat(s.path)
		if err != nil {
			return err
		}
		if tx.Size() > st.Size() {
			return &store.CorruptError{Path: s.path, Err: fmt.Errorf("truncated: the file has %d bytes, its pages need %d", st.Size(), tx.Size())}
		}
		// Under bbolt's file lock, so no commit is writing a meta page.
		if err := checkMeta(s.path); err != nil {
			return err
		}
		return fn(tx)
	}
}

// withDB opens the file, runs fn and closes it. Page faults and panics
// inside bbolt (a damaged file) become a *CorruptError.
func (s *Store) withDB(deadline time.Time, readOnly bool, grow int64, fn func(db *bolt.DB) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &store.CorruptError{Path: s.path, Err: fmt.Errorf("reading the file failed: %v", r)}
		}
	}()
	st, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database file at %s: %w", s.path, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return &store.CorruptError{Path: s.path, Err: errors.New("the file is empty (truncated?)")}
	}
	wait := time.Until(deadline)
	if wait < time.Millisecond {
		wait = time.Millisecond // bbolt's zero means forever
	}
	var mmap int
	if grow > 0 {
		mmap = int(st.Size() + 2*grow) // pages freed and rewritten as well as new ones
	}
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{
		ReadOnly:        readOnly,
		Timeout:         wait,
		NoSync:          s.opts.NoSync,
		InitialMmapSize: mmap,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			return os.OpenFile(name, flag&^os.O_CREATE, perm) // never create or initialise here
		},
	})
	if err != nil {
		switch {
		case errors.Is(err, bolt.ErrTimeout):
			return fmt.Errorf("database %s: locked by another process for %v: %w", s.path, s.opts.Timeout, store.ErrBusy)
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("no database file at %s: %w", s.path, store.ErrNotFound)
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
			return err
		}
		return &store.CorruptError{Path: s.path, Err: err}
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return fn(db)
}

// nameFile adds the database's path to an I/O error that lacks it (bbolt's
// sync and allocation errors are bare errnos, e.g. "no space left on
// device").
func (s *Store) nameFile(err error) error {
	var errno syscall.Errno
	var pe *fs.PathError
	if err == nil || !(errors.As(err, &errno) || errors.As(err, &pe)) || strings.Contains(err.Error(), s.path) {
		return err
	}
	return fmt.Errorf("write database %s: %w", s.path, err)
}

// checkFree returns ErrDiskFull when the database's file system has less
// than Options.MinFreeBytes available.
func (s *Store) checkFree() error {
	need := s.opts.MinFreeBytes
	if need == 0 {
		need = DefaultMinFree
	}
	if need < 0 {
		return nil
	}
	free, ok := freeBytes(filepath.Dir(s.path))
	if ok && free < need {
		return fmt.Errorf("%w: %d MiB free on the file system of %s, a trial needs %d MiB", store.ErrDiskFull, free>>20, s.path, need>>20)
	}
	return nil
}
