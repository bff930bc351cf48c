package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteOutput: an output flag's file is created (or truncated) and
// written, "" writes to stdout, and the writer's error comes back.
func TestWriteOutput(t *testing.T) {
	hello := func(w io.Writer) error { _, err := io.WriteString(w, "hello\n"); return err }
	path := filepath.Join(t.TempDir(), "out.csv")
	if err := os.WriteFile(path, []byte("an older and longer file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := writeOutput(&stdout, path, hello); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello\n" {
		t.Errorf("file = %q, %v; want hello", b, err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout got %q with a file named", stdout.String())
	}
	if err := writeOutput(&stdout, "", hello); err != nil || stdout.String() != "hello\n" {
		t.Errorf("stdout = %q, %v; want hello", stdout.String(), err)
	}
	boom := errors.New("boom")
	if err := writeOutput(&stdout, path, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	if err := writeOutput(&stdout, filepath.Join(path, "no-dir", "x"), hello); err == nil {
		t.Error("no error for a path that cannot be created")
	}
}
