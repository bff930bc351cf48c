//go:build !cgo || !linux || nonvml

package trial

import "fmt"

// OpenNVML reports ErrNVMLUnavailable: this build has no NVML (it needs cgo
// on Linux, without the nonvml tag).
func OpenNVML() (GPUSource, error) {
	return nil, fmt.Errorf("%w: built without cgo/NVML", ErrNVMLUnavailable)
}
