package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file is replaced whole with the mode asked for, and a
// failed write leaves the old file and no temporary file behind.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "front.svg")
	if err := os.WriteFile(path, []byte("old and longer content"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		perm os.FileMode
		data string
	}{{"shared", 0o644, "new"}, {"owner only", 0o600, "newer"}} {
		if err := WriteFile(path, []byte(tc.data), tc.perm); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != tc.data {
			t.Errorf("%s: file = %q, %v; want %q", tc.name, b, err, tc.data)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != tc.perm {
			t.Errorf("%s: mode = %v, %v; want %v", tc.name, st.Mode().Perm(), err, tc.perm)
		}
	}

	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "newer" {
		t.Errorf("a failed write changed the file to %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %v, want only front.svg", names)
	}

	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: err = %v, want ErrNotExist", err)
	}
}
