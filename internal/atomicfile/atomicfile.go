package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write writes path with fn and gives it perm. The temporary file is named
// after path with a leading dot and a random suffix; it is removed when
// anything fails, and path is then left as it was.
func Write(path string, perm os.FileMode, fn func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing left to remove after the rename
	err = fn(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), perm) // CreateTemp makes 0600
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}

// WriteFile is Write of the bytes b, as os.WriteFile.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
