// Package storetest is the conformance suite every store backend passes
// (restic's backend-suite pattern): the same inputs through the bbolt store
// and the PostgreSQL store give the same observable results. Run runs it
// against one backend; Script and Snapshot let a test compare two backends
// record for record.
package storetest
