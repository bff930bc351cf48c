package spaces

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultEngineVersion is assumed when the engine's version is unknown.
const DefaultEngineVersion = "0.11.0"

// CompareVersions compares dotted versions numerically ("0.10.2" < "0.11");
// a pre-release or local suffix ("0.11.0rc1", "0.11.0+cu128") is ignored.
func CompareVersions(a, b string) (int, error) {
	pa, err := parseVersion(a)
	if err != nil {
		return 0, err
	}
	pb, err := parseVersion(b)
	if err != nil {
		return 0, err
	}
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			if x < y {
				return -1, nil
			}
			return 1, nil
		}
	}
	return 0, nil
}

func parseVersion(s string) ([]int, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if s == "" {
		return nil, fmt.Errorf("empty version")
	}
	var out []int
	for _, part := range strings.Split(s, ".") {
		end := 0
		for end < len(part) && part[end] >= '0' && part[end] <= '9' {
			end++
		}
		if end == 0 {
			if len(out) > 0 {
				break // "0.11.dev3": stop at the first non-numeric part
			}
			return nil, fmt.Errorf("version %q: not of the form X.Y.Z", s)
		}
		n, err := strconv.Atoi(part[:end])
		if err != nil || n > 1<<20 {
			return nil, fmt.Errorf("version %q: bad number %q", s, part[:end])
		}
		out = append(out, n)
		if end < len(part) {
			break
		}
	}
	return out, nil
}

// inVersionRange reports whether v is in [since, until); empty bounds are open.
func inVersionRange(v, since, until string) bool {
	if since != "" {
		if c, err := CompareVersions(v, since); err == nil && c < 0 {
			return false
		}
	}
	if until != "" {
		if c, err := CompareVersions(v, until); err == nil && c >= 0 {
			return false
		}
	}
	return true
}
