package main

import (
	"os"
	"testing"
)

var sharedDir string

// tempDir is a directory removed when the test binary exits (TestMain), so
// the compiled binary is shared by all tests.
func tempDir() (string, error) { return sharedDir, nil }

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "vllm-sim-test-")
	if err != nil {
		panic(err)
	}
	sharedDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
