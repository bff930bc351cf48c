package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Password is the superuser's password on loopback TCP (sockets trust).
const Password = "pgtest-secret"

// User is the superuser's name.
const User = "tuner"

// Cluster is a running throwaway server.
type Cluster struct {
	Dir  string
	Port int
	bin  string
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	n    atomic.Int64
}

// ErrNoServer reports that no PostgreSQL binaries were found.
var ErrNoServer = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// BinDir finds the directory with initdb and postgres: $PG_BIN, the PATH,
// then /usr/lib/postgresql/*/bin (Debian's layout), newest first.
func BinDir() (string, error) {
	if d := os.Getenv("PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%w in PG_BIN=%s", ErrNoServer, d)
		}
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		return "", ErrNoServer
	}
	best := m[0]
	for _, p := range m[1:] {
		if versionOf(p) > versionOf(best) {
			best = p
		}
	}
	return filepath.Dir(best), nil
}

func versionOf(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Start creates and starts a cluster.
func Start(ctx context.Context) (c *Cluster, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tuner-pgtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	cred, err := credential(dir)
	if err != nil {
		return nil, err
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", User,
		"--pwfile", pwfile, "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, Port: port, bin: bin, cred: cred}
	if err := c.Restart(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Restart starts the server of a cluster that Halt stopped, on the same
// port and data directory, and waits until it takes connections (Start
// uses it for the first start).
func (c *Cluster) Restart(ctx context.Context) error {
	if c.cmd != nil {
		return errors.New("pgtest: the server is running")
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", filepath.Join(c.Dir, "data"), "-p", strconv.Itoa(c.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+c.Dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd, c.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(c.done) }()
	if err := c.waitReady(ctx); err != nil {
		c.Halt()
		log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
		return fmt.Errorf("postgres did not come up: %w\n%s", err, log)
	}
	return nil
}

// Halt stops the server as `pg_ctl stop -m fast` does (SIGINT: clients are
// disconnected, open transactions rolled back), then SIGKILLs what is left
// of its process group; the data directory and port stay for Restart.
func (c *Cluster) Halt() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
	c.cmd = nil
}

// credential is the user to run the server as: nobody when running as
// root, else the current user (nil).
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root and no user nobody to run postgres as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is the loopback URL of a database (with the password).
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", User, Password, c.Port, db)
}

// CreateDB creates a new empty database and returns its URL.
func (c *Cluster) CreateDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.n.Add(1))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return c.URL(name), nil
}

// Stop ends the server (Halt) and removes the directory.
func (c *Cluster) Stop() {
	c.Halt()
	_ = os.RemoveAll(c.Dir)
}

// Own starts a cluster for t alone (one it may Halt and Restart), stopped
// when t ends. It skips or fails t as DB does when the server binaries are
// missing.
func Own(t testing.TB) *Cluster {
	t.Helper()
	var c *Cluster
	var err error
	for range 3 { // the free port can be taken before the server binds it
		if c, err = Start(context.Background()); err == nil || errors.Is(err, ErrNoServer) {
			break
		}
	}
	if err != nil {
		noServer(t, err)
	}
	t.Cleanup(c.Stop)
	return c
}

// noServer skips t when no server binaries are installed (outside CI) and
// fails it otherwise.
func noServer(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skipf("skipping the PostgreSQL test: %v (install Debian's postgresql, or set PG_BIN)", err)
	}
	t.Fatalf("pgtest: %v", err)
}

var (
	once    sync.Once
	shared  *Cluster
	failure error
	mainRun bool
)

// Main runs a package's tests and stops the shared cluster after them
// (the first DB call starts it, so tests that need none pay nothing): call
// it from TestMain as os.Exit(pgtest.Main(m)), or call Stop after m.Run.
func Main(m *testing.M) int {
	mainRun = true
	defer Stop()
	return m.Run()
}

// Stop ends the shared cluster, if one was started.
func Stop() {
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

// DB returns the URL of a new database on the shared cluster for t. When
// the server binaries are missing it skips t, or fails it under CI=true.
func DB(t testing.TB) string {
	t.Helper()
	if !mainRun {
		t.Fatal("pgtest: call pgtest.Main from TestMain (it stops the cluster)")
	}
	once.Do(func() {
		// A free port can be taken between the probe and the server's
		// bind: try a few.
		for range 3 {
			if shared, failure = Start(context.Background()); failure == nil || errors.Is(failure, ErrNoServer) {
				return
			}
		}
	})
	if failure != nil {
		noServer(t, failure)
	}
	url, err := shared.CreateDB(context.Background())
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	return url
}
