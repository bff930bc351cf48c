package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestHaltRestart: a halted server refuses connections; restarted, it
// serves the same data on the same port.
func TestHaltRestart(t *testing.T) {
	ctx := context.Background()
	c := Own(t)
	url, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	port := c.Port
	c.Halt()
	if err := exec("SELECT 1"); err == nil {
		t.Fatal("a halted server took a connection")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port != port {
		t.Errorf("port %d after the restart, was %d", c.Port, port)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 7 {
		t.Errorf("after the restart: v=%d, %v", v, err)
	}
}
