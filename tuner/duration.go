package tuner

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as Go's duration
// text ("90s", "8h"), as the CLI's flags take it; a bare number is
// nanoseconds.
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration: want a string such as \"90s\" or nanoseconds, got %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Std is d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
