package trial

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestServerIdentity: the models and version an OpenAI-compatible server
// reports, and the errors that name what failed.
func TestServerIdentity(t *testing.T) {
	cases := []struct {
		name           string
		models, ver    string // response bodies ("": 404)
		wantModels     []string
		wantVersion    string
		modelErr, vErr string
	}{
		{name: "vllm", models: `{"object":"list","data":[{"id":"m1","object":"model"},{"id":"lora-a"}]}`, ver: `{"version":"0.10.2"}`,
			wantModels: []string{"m1", "lora-a"}, wantVersion: "0.10.2"},
		{name: "no version endpoint", models: `{"data":[{"id":"m1"}]}`, wantModels: []string{"m1"}, vErr: "GET /version: 404 Not Found"},
		{name: "no model", models: `{"data":[]}`, ver: `{}`, wantModels: []string{}},
		{name: "not json", models: `<html>`, ver: `{"version": 3}`, modelErr: "GET /v1/models: invalid character", vErr: "GET /version: json: cannot unmarshal"},
		{name: "not served", modelErr: "GET /v1/models: 404 Not Found", vErr: "GET /version: 404 Not Found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			for path, body := range map[string]string{"/v1/models": tc.models, "/version": tc.ver} {
				if body != "" {
					mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) })
				}
			}
			srv := httptest.NewServer(mux)
			defer srv.Close()
			ctx := context.Background()
			ids, err := ServedModels(ctx, srv.Client(), srv.URL)
			if tc.modelErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.modelErr) {
					t.Errorf("models: %v, want %q...", err, tc.modelErr)
				}
			} else if err != nil || !slices.Equal(ids, tc.wantModels) {
				t.Errorf("models %q (%v), want %q", ids, err, tc.wantModels)
			}
			v, err := ServerVersion(ctx, srv.Client(), srv.URL)
			if tc.vErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.vErr) || v != "" {
					t.Errorf("version %q, %v, want %q...", v, err, tc.vErr)
				}
			} else if err != nil || v != tc.wantVersion {
				t.Errorf("version %q (%v), want %q", v, err, tc.wantVersion)
			}
		})
	}
}
