package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vllm-tuner/tuner/internal/proctest"
)

// The binaries under test are built on first use (fuzz workers never pay
// for them) into one temporary directory removed by TestMain.
var bins proctest.Bins

// binPkgs are the packages of the binaries bin builds: "fakeengine" is
// trial's multi-process stand-in for vllm serve.
var binPkgs = map[string]string{"tuner": "../cmd/tuner", "vllm-sim": "../cmd/vllm-sim", "fakeengine": "../trial/testdata/fakeengine"}

// bin returns the path of a built binary ("tuner", "vllm-sim" or
// "fakeengine").
func bin(t testing.TB, name string) string {
	t.Helper()
	return bins.Path(t, name, binPkgs[name])
}

// childMode lets the test binary re-execute itself as a helper process (see
// kill_test.go); the mode is in RELIABILITY_CHILD.
const childEnv = "RELIABILITY_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	if dir := bins.Dir(); dir != "" {
		for _, name := range []string{"vllm-sim", "fakeengine"} {
			if left := proctest.Of(filepath.Join(dir, name)); len(left) > 0 {
				fmt.Fprintf(os.Stderr, "reliability: %s processes left after the tests: %v\n", name, left)
				code = 1
			}
		}
		bins.Remove()
	}
	os.Exit(code)
}

func fmtSscan(s string, p *int) (int, error) { return fmt.Sscan(s, p) }

func itoa(n int) string { return strconv.Itoa(n) }

func strconvQuote(s string) string { return strconv.Quote(s) }
