package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	"hash/fnv"
	"io"
	"os"
)

// bbolt keeps two meta pages (pages 0 and 1) and, when one fails its
// checksum, silently reads the file as of the other one: an older commit,
// whose pages later commits may have reused. That is how a file with a few
// flipped bytes read as a database with fewer trials, or none. Writes
// happen only under the exclusive file lock and a meta page is one 4 KiB
// write, so a damaged meta page is damage to report, never a state to read.
//
// The on-disk layout (bbolt's internal/common, file format version 2,
// little-endian): a 16-byte page header, then magic, version, page size,
// flags (4 bytes each), root bucket (page and sequence), freelist page,
// high-water mark, transaction ID (8 bytes each) and the FNV-64a checksum
// of the 56 bytes before it.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSumOffset  = 56 // bytes of the meta covered by its checksum
	metaSize       = metaSumOffset + 8
)

// boltMeta is the part of a meta page checkMeta needs.
type boltMeta struct {
	pageSize uint32
	txid     uint64
}

// parseMeta validates one meta page image (starting at its page header).
func parseMeta(b []byte) (boltMeta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, errors.New("short page")
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian
	switch {
	case le.Uint32(m[0:]) != boltMagic:
		return boltMeta{}, errors.New("bad magic")
	case le.Uint32(m[4:]) != boltVersion:
		return boltMeta{}, fmt.Errorf("format version %d", le.Uint32(m[4:]))
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:metaSumOffset])
	if h.Sum64() != le.Uint64(m[metaSumOffset:]) {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	ps := le.Uint32(m[8:])
	if ps < 1024 || ps > 1<<16 || ps&(ps-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d", ps)
	}
	return boltMeta{pageSize: ps, txid: le.Uint64(m[48:])}, nil
}

// checkMeta reads both meta pages of the file at path and reports a damaged
// one as a *CorruptError. A file too short for two meta pages is left to
// bbolt's own open, which reports it.
func checkMeta(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	first := make([]byte, pageHeaderSize+metaSize)
	if _, err := io.ReadFull(f, first); err != nil {
		return nil
	}
	m0, err0 := parseMeta(first)
	// Meta page 1 sits one page further; without a readable page 0 the
	// page size is guessed as bbolt does (the OS page size, else 4 KiB).
	sizes := []int64{int64(m0.pageSize)}
	if err0 != nil {
		sizes = []int64{int64(os.Getpagesize()), 4096}
	}
	var err1 error = errors.New("unreadable")
	for _, ps := range sizes {
		second := make([]byte, pageHeaderSize+metaSize)
		if _, err := f.ReadAt(second, ps); err != nil {
			continue
		}
		if _, err1 = parseMeta(second); err1 == nil {
			break
		}
	}
	switch {
	case err0 != nil && err1 != nil:
		return &store.CorruptError{Path: path, Err: fmt.Errorf("both meta pages are damaged (%v; %v)", err0, err1)}
	case err0 != nil:
		return &store.CorruptError{Path: path, Err: fmt.Errorf("meta page 0 is damaged (%v): the file would read as of an older commit", err0)}
	case err1 != nil:
		return &store.CorruptError{Path: path, Err: fmt.Errorf("meta page 1 is damaged (%v): the file would read as of an older commit", err1)}
	}
	return nil
}
