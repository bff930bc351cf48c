package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Bins builds binaries on first use (not in TestMain, so fuzz workers and
// tests that need none do not pay for them) into one temporary directory.
// The zero value is ready; TestMain calls Remove after m.Run.
type Bins struct {
	mu    sync.Mutex
	dir   string
	built map[string]*built
}

type built struct {
	once sync.Once
	path string
	err  error
}

// Build compiles package pkg (as `go build` takes it, relative to the
// test's package directory) into a binary called name, once: later calls
// return the first call's path or error.
func (b *Bins) Build(name, pkg string) (string, error) {
	b.mu.Lock()
	if b.dir == "" {
		d, err := os.MkdirTemp("", "tuner-test-bin-")
		if err != nil {
			b.mu.Unlock()
			return "", err
		}
		b.dir = d
	}
	if b.built == nil {
		b.built = map[string]*built{}
	}
	one := b.built[name]
	if one == nil {
		one = &built{}
		b.built[name] = one
	}
	dir := b.dir
	b.mu.Unlock()
	one.once.Do(func() {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput(); err != nil {
			one.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
			return
		}
		one.path = p
	})
	return one.path, one.err
}

// Path is Build that fails the test when pkg does not build.
func (b *Bins) Path(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := b.Build(name, pkg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Dir is the directory of the binaries ("" before the first Build).
func (b *Bins) Dir() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dir
}

// Remove deletes the binaries.
func (b *Bins) Remove() {
	if d := b.Dir(); d != "" {
		os.RemoveAll(d)
	}
}
