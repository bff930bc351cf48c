package trial

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// Binaries built once for the package's tests.
var (
	fakeEngine string // testdata/fakeengine
	simBinary  string // cmd/vllm-sim, "" when it does not build (yet)
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trial-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeEngine = filepath.Join(dir, "fakeengine")
	if out, err := exec.Command("go", "build", "-o", fakeEngine, "./testdata/fakeengine").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fakeengine: %v\n%s", err, out)
		os.Exit(1)
	}
	sim := filepath.Join(dir, "vllm-sim")
	if out, err := exec.Command("go", "build", "-o", sim, "../cmd/vllm-sim").CombinedOutput(); err == nil {
		simBinary = sim
	} else if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "vllm-sim does not build, its tests skip: %v\n%s", err, out)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
