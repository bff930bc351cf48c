package main

import "testing"

// runE2EMain runs the package's tests and removes the binaries the
// end-to-end tests built.
func runE2EMain(m *testing.M) int {
	return m.Run()
}
