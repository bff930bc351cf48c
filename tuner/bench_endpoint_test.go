package tuner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// --endpoint sends every cell to the endpoint it names and changes the
// matrix hash (a chat run is not a completions run's baseline); a cell
// naming the other endpoint is a usage error.
func TestBenchSpecEndpoint(t *testing.T) {
	const matrix = `name: m
defaults: {prompt: {kind: fixed, value: 8}, output: {kind: fixed, value: 4}, arrival: {kind: closed, concurrency: 1}, num_requests: 4}
cells:
  - {name: plain}
  - {name: chatty, endpoint: chat}
`
	spec := DefaultBenchSpec()
	spec.MatrixYAML, spec.URL = matrix, "http://127.0.0.1:1"
	b, err := spec.Resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := []trial.Endpoint{b.Matrix.Cells[0].Workload.Endpoint, b.Matrix.Cells[1].Workload.Endpoint}; got[0] != "" || got[1] != trial.EndpointChat {
		t.Fatalf("cells' endpoints without --endpoint: %q", got)
	}
	spec.Endpoint = "chat"
	c, err := spec.Resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Matrix.Cells[0].Workload.Endpoint != trial.EndpointChat || c.Matrix.Hash == b.Matrix.Hash {
		t.Errorf("--endpoint chat: cell endpoint %q, hash %s (was %s)", c.Matrix.Cells[0].Workload.Endpoint, c.Matrix.Hash, b.Matrix.Hash)
	}
	for _, ep := range []string{"completions", "responses"} {
		spec.Endpoint = ep
		_, err := spec.Resolve(context.Background())
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--endpoint") {
			t.Errorf("--endpoint %s: %v, want a usage error naming --endpoint", ep, err)
		}
	}
}
