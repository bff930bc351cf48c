package pgstore

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vllm-tuner/tuner/store"
)

// Config is what Open needs.
type Config struct {
	// URL is a postgres:// (or postgresql://) connection URL.
	URL string
	// ReadOnly opens for reading: no migration, no recovery, and every
	// transaction is read-only.
	ReadOnly bool
	// Logger receives recovery messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for record timestamps; nil means time.Now.
	Now func() time.Time
	// MaxConns bounds the pool (0: pgxpool's default).
	MaxConns int32
}

// IsURL reports whether a --db value names a PostgreSQL database rather
// than a bbolt file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// ErrConnect is store.ErrConnect.
var ErrConnect = store.ErrConnect

// Deadlines: every connection and statement has one, so a server that
// accepts TCP and never answers is an error naming host and database, not
// a hang. A URL's connect_timeout (seconds) or statement_timeout (the
// server's, in its units) overrides the defaults.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultStatementTimeout = 2 * time.Minute
	// clientSlack is how much longer the client waits than the server's
	// statement_timeout before it gives up on an answer.
	clientSlack = 15 * time.Second
)

// Store is a handle on a PostgreSQL database. Its methods are safe for
// concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	cfg     Config
	log     *slog.Logger
	where   string // "host:port/database" for messages
	display string // the URL without its password
	// connectTimeout bounds a connection's start, opTimeout one
	// transaction (the server's statement_timeout and some slack).
	connectTimeout, opTimeout time.Duration
	secret                    string // the password, scrubbed from every error

	mu      sync.Mutex
	closed  bool
	session string
	sconn   *pgx.Conn // holds the session's advisory lock
}

// Open connects, applies pending migrations (unless read-only) and marks
// as interrupted the running trials of writers that are gone.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, log: log}
	u, err := url.Parse(cfg.URL)
	if err != nil || !IsURL(cfg.URL) {
		// url.Parse's error quotes the URL: never show it.
		return nil, errors.New("open store: not a postgres:// URL")
	}
	if pw, ok := u.User.Password(); ok {
		s.secret = pw
		u.User = url.User(u.User.Username())
	}
	if q := u.Query(); q.Has("password") { // libpq also reads it from the query
		s.secret = q.Get("password")
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	s.display = u.String()
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, s.scrub(fmt.Errorf("open store %s: %w", s.display, err))
	}
	s.where = fmt.Sprintf("%s:%d/%s", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if pc.ConnConfig.ConnectTimeout <= 0 {
		pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	s.connectTimeout = pc.ConnConfig.ConnectTimeout
	s.opTimeout = DefaultStatementTimeout + clientSlack
	if v, ok := pc.ConnConfig.RuntimeParams["statement_timeout"]; ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			s.opTimeout = d + clientSlack
		} else if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			s.opTimeout = time.Duration(ms)*time.Millisecond + clientSlack
		}
	} else {
		pc.ConnConfig.RuntimeParams["statement_timeout"] = strconv.Itoa(int(DefaultStatementTimeout / time.Millisecond))
	}
	if cfg.ReadOnly {
		pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, s.connectErr(err)
	}
	s.pool = pool
	pctx, cancel := context.WithTimeout(ctx, s.connectTimeout)
	err = pool.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		return nil, s.connectErr(err)
	}
	if cfg.ReadOnly {
		v, err := s.schemaVersion(ctx)
		switch {
		case err != nil:
			pool.Close()
			return nil, err
		case v > len(migrations):
			pool.Close()
			return nil, fmt.Errorf("open store %s: schema %d: %w", s.where, v, store.ErrTooNew)
		case v < len(migrations):
			pool.Close()
			return nil, fmt.Errorf("open store %s: schema %d: %w", s.where, v, store.ErrNeedsMigration)
		}
		return s, nil
	}
	if _, err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.startSession(ctx, pc.ConnConfig); err != nil {
		pool.Close()
		return nil, s.connectErr(err)
	}
	if err := s.recoverInterrupted(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// connectErr is the error of a failed connection: host and database named,
// the password scrubbed.
func (s *Store) connectErr(err error) error {
	if noAnswer(err) {
		return s.scrub(fmt.Errorf("%w at %s: %w within %s", ErrConnect, s.where, store.ErrNoAnswer, s.connectTimeout))
	}
	return s.scrub(fmt.Errorf("%w at %s: %w", ErrConnect, s.where, err))
}

// noAnswer reports an error of a deadline that passed while the client
// waited for the server.
func noAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// scrub removes the password from an error's text (keeping its chain).
func (s *Store) scrub(err error) error {
	if err == nil || s.secret == "" || !strings.Contains(err.Error(), s.secret) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), s.secret, "xxxxx"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Path returns the database URL without its password (for messages).
func (s *Store) Path() string { return s.display }

// ReadOnly reports whether the Store was opened read-only.
func (s *Store) ReadOnly() bool { return s.cfg.ReadOnly }

// Close releases the session and the pool.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.sconn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.sconn.Close(ctx) // ends the session: its advisory lock goes with it
		cancel()
	}
	s.pool.Close()
	return err
}

func (s *Store) begin(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return store.ErrClosed
	}
	return ctx.Err()
}

// tx runs fn in one transaction (read-write unless the Store is read-only),
// retrying serialization failures and deadlocks a few times.
func (s *Store) tx(ctx context.Context, write bool, fn func(pgx.Tx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if write && s.cfg.ReadOnly {
		return store.ErrReadOnly
	}
	opts := pgx.TxOptions{}
	if !write {
		opts.AccessMode = pgx.ReadOnly
	}
	tctx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	err := pgx.BeginTxFunc(tctx, s.pool, opts, fn)
	if err != nil && ctx.Err() == nil && noAnswer(err) {
		err = fmt.Errorf("%s: %w within %s: %w", s.where, store.ErrNoAnswer, s.opTimeout, err)
	}
	return s.scrub(err)
}

// Advisory lock keys: sessions and study locks in separate classes (the
// two-int form), the low 32 bits of the ID as the key.
const (
	classSession = 0x7475_6e01 // "tun" + 1
	classStudy   = 0x7475_6e02
)

func lockKey(id string) int32 {
	b, _ := hex.DecodeString(id)
	var k [8]byte
	copy(k[8-min(len(b), 8):], b)
	return int32(binary.BigEndian.Uint64(k[:]))
}

func (s *Store) startSession(ctx context.Context, cc *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	for range 5 {
		id := store.RandomID()
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", int32(classSession), lockKey(id)).Scan(&ok); err != nil {
			conn.Close(ctx)
			return err
		}
		if ok {
			s.session, s.sconn = id, conn
			return nil
		}
	}
	conn.Close(ctx)
	return errors.New("no free session key")
}

// recoverInterrupted marks the running trials of dead sessions interrupted.
// Leased trials (a shared study's) are left to their lease: a session also
// ends when the server restarts while its worker lives on, and such a
// worker goes on renewing its lease and finishes its trial; a dead one's
// lease runs out and ReapExpired takes the trial back.
func (s *Store) recoverInterrupted(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, "SELECT DISTINCT coalesce(session, '') FROM trials WHERE state = 'running' AND lease_until IS NULL AND coalesce(session, '') <> $1", s.session)
	if err != nil {
		return s.wrap("recover interrupted trials", err)
	}
	sessions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s.wrap("recover interrupted trials", err)
	}
	for _, sess := range sessions {
		if err := s.recoverSession(ctx, sess); err != nil {
			return s.wrap("recover interrupted trials", err)
		}
	}
	return nil
}

func (s *Store) recoverSession(ctx context.Context, sess string) error {
	return s.tx(ctx, true, func(tx pgx.Tx) error {
		// Transaction-level: held until the marking commits, so the
		// session cannot come back half way (it never does: IDs are new).
		var dead bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, $2)", int32(classSession), lockKey(sess)).Scan(&dead); err != nil {
			return err
		}
		if !dead {
			return nil
		}
		ts, err := s.interrupt(ctx, tx, func(*store.Trial) string { return "the writing process died" },
			"SELECT rec::text FROM trials WHERE state = 'running' AND lease_until IS NULL AND coalesce(session, '') = $1 ORDER BY study_id, seq FOR UPDATE", sess)
		for _, t := range ts {
			s.log.Warn("trial interrupted by a dead process", "trial", t.ID, "session", sess)
		}
		return err
	})
}

// interrupt marks interrupted the running trials a query selects (and
// locks), saying why in their notes, and returns them.
func (s *Store) interrupt(ctx context.Context, tx pgx.Tx, why func(*store.Trial) string, query string, args ...any) ([]store.Trial, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	ts, err := collectTrials(rows)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		t := &ts[i]
		t.State = store.StateInterrupted
		t.Ended = s.cfg.Now().UTC()
		if t.Notes != "" {
			t.Notes += "; "
		}
		t.Notes += "interrupted: " + why(t)
		if err := putTrial(ctx, tx, t, false); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// wrap names the operation and the database.
func (s *Store) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("%w", store.ErrNotFound)
	}
	return s.scrub(fmt.Errorf("%s (%s): %w", what, s.where, err))
}
