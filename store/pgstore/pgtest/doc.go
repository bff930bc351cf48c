// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb
// into a temporary directory, the server on a free loopback port (and a
// socket in that directory), as an unprivileged user when the tests run as
// root (PostgreSQL refuses root). The server runs in its own process group
// and dies with the test binary (Pdeathsig); Stop ends it and removes the
// directory.
//
// A package's TestMain calls Main; the first test that calls DB starts one
// cluster for all the package's tests, each of which takes a database of
// its own, and Main stops it after the tests. Outside CI the
// tests skip with a message when the PostgreSQL binaries are missing; under
// CI=true a missing server fails them.
package pgtest
