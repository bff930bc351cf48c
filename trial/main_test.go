package trial

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Binaries are built on first use (not in TestMain, so fuzz workers do not
// pay for them) into one temporary directory.
var (
	binDir   string
	binOnce  sync.Map // name -> *binary
	binMutex sync.Mutex
)

type binary struct {
	once sync.Once
	path string
	err  error
}

func buildBinary(t testing.TB, name, pkg string) string {
	t.Helper()
	binMutex.Lock()
	if binDir == "" {
		d, err := os.MkdirTemp("", "trial-test-")
		if err != nil {
			binMutex.Unlock()
			t.Fatal(err)
		}
		binDir = d
	}
	binMutex.Unlock()
	v, _ := binOnce.LoadOrStore(name, &binary{})
	b := v.(*binary)
	b.once.Do(func() {
		p := filepath.Join(binDir, name)
		out, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
			return
		}
		b.path = p
	})
	if b.err != nil {
		return ""
	}
	return b.path
}

// fakeEngineBin is testdata/fakeengine, built once.
func fakeEngineBin(t testing.TB) string {
	p := buildBinary(t, "fakeengine", "./testdata/fakeengine")
	if p == "" {
		t.Fatal("fakeengine does not build")
	}
	return p
}

// simBin is cmd/vllm-sim; the test skips when it does not build.
func simBin(t testing.TB) string {
	p := buildBinary(t, "vllm-sim", "../cmd/vllm-sim")
	if p == "" {
		t.Skip("cmd/vllm-sim does not build")
	}
	return p
}

func TestMain(m *testing.M) {
	if os.Getenv("TRIAL_TEST_HELPER") == "run-trial" {
		os.Exit(helperRunTrial())
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
