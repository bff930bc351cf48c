package trial

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// usageStream answers with chunks content chunks and, when usage >= 0, a
// usage chunk reporting that many completion tokens.
func usageStream(chunks int, usage float64) func(http.ResponseWriter, *completionReq) bool {
	return func(w http.ResponseWriter, r *completionReq) bool {
		var lines []string
		for range chunks {
			lines = append(lines, `{"choices":[{"text":"a"}]}`)
		}
		if usage >= 0 {
			lines = append(lines, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%g}}`, len(r.Prompt), usage))
		}
		sseWrite(w, append(lines, "[DONE]")...)
		return true
	}
}

// TestClientChecksUsage: usage is checked against the chunks received and
// max_tokens; counts no honest server reports fail the request with a
// class (a usage of 1e15 tokens must not become 1e18 tok/s), a server that
// stops before max_tokens although asked to ignore EOS is marked.
func TestClientChecksUsage(t *testing.T) {
	const asked = 8
	tests := []struct {
		name     string
		chunks   int
		usage    float64 // < 0: no usage chunk
		class    string  // "": the request succeeds
		mismatch bool
		out      int
	}{
		{"exact", asked, asked, "", false, asked},
		{"chunks bundle tokens", 4, asked, "", false, asked},
		{"no usage", asked, -1, "", false, asked},
		{"absurd usage", asked, 1e15, ReqErrBadUsage, false, 0},
		{"usage above max_tokens", asked, asked + 1, ReqErrBadUsage, false, 0},
		{"usage below chunks", asked, 3, ReqErrBadUsage, false, 0},
		{"echo: more chunks than asked", 3 * asked, -1, ReqErrExcessTokens, false, 0},
		{"echo with usage", 3 * asked, 3 * asked, ReqErrBadUsage, false, 0},
		{"echo past the chunk cap", 40 * asked, 40 * asked, ReqErrExcessTokens, false, 0},
		{"ignore_eos ignored", 3, 3, "", true, 3},
		{"ignore_eos ignored, no usage", 3, -1, "", true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := newStreamServer(t, &streamServer{hook: usageStream(tt.chunks, tt.usage)})
			c := NewClient(base, "m", 5*time.Second)
			defer c.Close()
			rec := c.Do(context.Background(), RequestSpec{PromptLen: 4, OutputLen: asked}, time.Now())
			if got := class(rec); got != tt.class {
				t.Fatalf("class %q (Err %q), want %q", got, rec.Err, tt.class)
			}
			if rec.TokenMismatch != tt.mismatch || rec.OutputLen != tt.out || rec.Requested != asked {
				t.Errorf("mismatch %v out %d asked %d, want %v %d %d", rec.TokenMismatch, rec.OutputLen, rec.Requested, tt.mismatch, tt.out, asked)
			}
			m := Summarize([]Record{rec}, nil)
			if tt.class != "" && (m.Failed != 1 || m.Errors[tt.class] != 1 || m.TotalOutputTokens != 0) {
				t.Errorf("metrics: failed %d errors %v tokens %d", m.Failed, m.Errors, m.TotalOutputTokens)
			}
			if tt.mismatch && m.TokenMismatches != 1 {
				t.Errorf("token mismatches %d, want 1", m.TokenMismatches)
			}
		})
	}
}

func class(r Record) string {
	if r.Err == "" {
		return ""
	}
	return RequestErrorClass(r.Err)
}

func TestRequestErrorClass(t *testing.T) {
	tests := []struct{ err, want string }{
		{`http 400: {"object":"error","message":"This model's maximum context length is 256 tokens. However, you requested 576 tokens (512 in the messages, 64 in the completion).","type":"BadRequestError","code":400}`, ReqErrContextLength},
		{"http 400: 'max_tokens' or 'max_completion_tokens' is too large: 64. This model's maximum context length is 256 tokens", ReqErrContextLength},
		{"http 400: The prompt (total length 300) is too long to fit into the model (context length 256).", ReqErrContextLength},
		{"400 Bad Request: request has 300 input tokens and 64 output tokens; maximum context length is 256", ReqErrContextLength},
		{"http 400: temperature must be non-negative", "http_400"},
		{"http 429: rate limited", "http_429"},
		{"http 500: EngineDeadError", "http_500"},
		{"timeout", ReqErrTimeout},
		{"cancelled", ReqErrCancelled},
		{"stream: unexpected EOF", ReqErrStream},
		{`malformed chunk: "{\"choices"`, ReqErrMalformed},
		{"engine error: boom", ReqErrEngine},
		{"no content chunk", ReqErrNoContent},
		{"bad usage: usage.completion_tokens 1e15 > max_tokens 64", ReqErrBadUsage},
		{"excess tokens: 325 content chunks > max_tokens 64", ReqErrExcessTokens},
		{`Post "http://127.0.0.1:1/v1/completions": dial tcp 127.0.0.1:1: connect: connection refused`, ReqErrRefused},
		{`Post "http://127.0.0.1:8000/v1/completions": read tcp 127.0.0.1:5->127.0.0.1:8000: read: connection reset by peer`, ReqErrReset},
		{"http 9999: odd", ReqErrOther},
		{"", ReqErrOther},
	}
	for _, tt := range tests {
		if got := RequestErrorClass(tt.err); got != tt.want {
			t.Errorf("RequestErrorClass(%.60q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

var reqErrClasses = []string{ReqErrContextLength, ReqErrBadUsage, ReqErrExcessTokens, ReqErrTimeout, ReqErrCancelled,
	ReqErrStream, ReqErrMalformed, ReqErrEngine, ReqErrNoContent, ReqErrRefused, ReqErrReset, ReqErrOther}

func FuzzRequestErrorClass(f *testing.F) {
	for _, s := range []string{"http 400: maximum context length is 4", "400 Bad Request: x", "http 500: y", "timeout", "stream", "http :", "1000 x: y", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := RequestErrorClass(s)
		if slices.Contains(reqErrClasses, c) {
			return
		}
		code, ok := strings.CutPrefix(c, "http_")
		if !ok || len(code) != 3 || code < "100" || code > "599" {
			t.Fatalf("RequestErrorClass(%q) = %q: not a class", s, c)
		}
	})
}
