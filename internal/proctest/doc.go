// Package proctest is what the tests that run real processes share:
// building the project's binaries once per test process (Bins), starting
// a child in a process group of its own with its output captured (Start,
// Proc), running one to its end (Run), waiting for an HTTP health endpoint
// (WaitHealthy), a free loopback port (FreePort), and reading /proc to see
// which processes are left (Scan, Of, Group). Tests only: it calls
// t.Fatal.
package proctest
