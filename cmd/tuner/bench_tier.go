package main

import (
	"bufio"
	"bytes"
	"strings"

	"github.com/vllm-tuner/tuner/bounded"
)

// readModelList reads one model a line; blank lines and # comments are
// skipped.
func readModelList(path string) ([]string, error) {
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return nil, usagef("--models: %v", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, usagef("%s:%d: %q: want one model name a line", path, n, line)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, usagef("--models %s lists no model", path)
	}
	return out, nil
}
