package trial

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAllEvents(t *testing.T, in string) []string {
	t.Helper()
	r := newSSEReader(strings.NewReader(in), 0)
	var out []string
	for {
		d, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, string(d))
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"basic", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: [DONE]\r\n\r\n", []string{"a", "[DONE]"}},
		{"no space", "data:a\n\n", []string{"a"}},
		{"multi-line", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comments and fields", ": ping\nevent: x\nid: 3\ndata: a\nretry: 5\n\n:\n\n", []string{"a"}},
		{"missing final blank", "data: a\n\ndata: b", []string{"a", "b"}},
		{"empty data", "data:\n\n", []string{""}},
		{"blank lines only", "\n\n\n", nil},
		{"field without colon", "data\n\n", []string{""}},
		{"long line", "data: " + strings.Repeat("x", 70000) + "\n\n", []string{strings.Repeat("x", 70000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAllEvents(t, tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %q, want %q", len(got), got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %.40q, want %.40q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestSSEReaderLimit: a line or an event's data over the limit is
// errStreamTooLong, and the reader stops reading at the limit (the rest of
// an endless line is never consumed).
func TestSSEReaderLimit(t *testing.T) {
	const max = 100
	x := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name, in string
		want     []string // events before the error
		tooLong  bool
	}{
		{"at the limit", "data:" + x(95) + "\n\n", []string{x(95)}, false},
		{"event at the limit", "data:" + x(49) + "\ndata:" + x(50) + "\n\n", []string{x(49) + "\n" + x(50)}, false},
		{"line over", "data: a\n\ndata:" + x(200) + "\n\n", []string{"a"}, true},
		{"comment over", ":" + x(101) + "\n\n", nil, true},
		{"crlf at the limit", "data:" + x(95) + "\r\n\r\n", []string{x(95)}, false},
		{"event over", strings.Repeat("data:"+x(30)+"\n", 4) + "\n", nil, true},
		{"no newline", "data:" + x(150), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tt.in), max)
			r.br = bufio.NewReaderSize(r.br, 16) // force the long-line path
			var got []string
			var err error
			for {
				var d []byte
				if d, err = r.Next(); err != nil {
					break
				}
				got = append(got, string(d))
			}
			if tooLong := errors.Is(err, errStreamTooLong); tooLong != tt.tooLong {
				t.Fatalf("err = %v, want too long %v", err, tt.tooLong)
			}
			if !tt.tooLong && !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v, want EOF", err)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("endless line", func(t *testing.T) {
		src := &countingReader{}
		r := newSSEReader(src, 1<<20)
		if _, err := r.Next(); !errors.Is(err, errStreamTooLong) {
			t.Fatalf("err = %v, want too long", err)
		}
		if src.n > 1<<20+64<<10 {
			t.Errorf("read %d bytes of an endless line, want at most the limit and one buffer", src.n)
		}
	})
}

// countingReader is an endless "data:xxxx..." line without a newline.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	if c.n == 0 && len(p) >= 5 {
		copy(p, "data:")
	}
	c.n += len(p)
	return len(p), nil
}

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name, in string
		want     chunk
		err      bool
	}{
		{"done", "[DONE]", chunk{Done: true}, false},
		{"token", `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" Hi","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`, chunk{Content: true}, false},
		{"usage", `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1024,"total_tokens":1152,"completion_tokens":128}}`, chunk{Usage: true, PromptTokens: 1024, CompletionTokens: 128}, false},
		{"continuous usage", `{"choices":[{"text":"a"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, chunk{Content: true, Usage: true, PromptTokens: 5, CompletionTokens: 1}, false},
		{"text mimics keys", `{"choices":[{"text":"\"choices\":[] \"usage\":{\"completion_tokens\":9}"}]}`, chunk{Content: true}, false},
		{"escaped key", `{"choic\u0065s":[{}]}`, chunk{Content: true}, false},
		{"nested error", `{"error":{"message":"engine dead","type":"InternalServerError","param":null,"code":500}}`, chunk{Error: true, Message: "engine dead"}, false},
		{"flat error", `{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}`, chunk{Error: true, Message: "too long"}, false},
		{"whitespace", " { \"choices\" : [ ] , \"usage\" : { \"completion_tokens\" : 3 } } ", chunk{Usage: true, CompletionTokens: 3}, false},
		{"truncated", `{"choices":[{"text":"a"`, chunk{}, true},
		{"garbage", `not json`, chunk{}, true},
		{"trailing", `{"choices":[]} x`, chunk{}, true},
		{"trailing comma", `{"choices":[],}`, chunk{}, true},
		{"bad literal", `{"choices":[],"x":tru}`, chunk{}, true},
		{"mismatched", `{"choices":[{]}`, chunk{}, true},
		{"empty", ``, chunk{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseChunk([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// reference decodes a chunk with encoding/json, for the differential fuzz test.
func reference(b []byte) (content, usage bool, prompt, completion int, isErr bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return
	}
	if raw, ok := top["choices"]; ok {
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) == nil {
			content = len(arr) > 0
		}
	}
	if raw, ok := top["usage"]; ok {
		var u map[string]json.RawMessage
		if json.Unmarshal(raw, &u) == nil && u != nil {
			usage = true
			var n int
			if json.Unmarshal(u["prompt_tokens"], &n) == nil {
				prompt = n
			}
			n = 0
			if json.Unmarshal(u["completion_tokens"], &n) == nil {
				completion = n
			}
		}
	}
	if raw, ok := top["error"]; ok && string(raw) != "null" {
		isErr = true
	}
	if string(top["object"]) == `"error"` {
		isErr = true
	}
	return
}

func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{
		"[DONE]",
		`{"choices":[{"index":0,"text":" Hi","finish_reason":null}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":1024,"total_tokens":1152,"completion_tokens":128}}`,
		`{"error":{"message":"x","code":500}}`,
		`{"object":"error","message":"too long"}`,
		`{"choices":[{"text":"\"choices\":[]"}]}`,
		`{"a":[1,2,{"b":"c"}],"choices":[[]],"usage":{"completion_tokens":1e2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseChunk(b)
		if !json.Valid(b) || bytes.Equal(bytes.TrimSpace(b), []byte("[DONE]")) {
			return // any answer but a panic is fine for invalid JSON
		}
		if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
			if err != nil {
				// The lean walker may only reject what encoding/json rejects,
				// except for objects nested deeper than its limit.
				if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < 512 {
					t.Fatalf("rejected valid JSON %q: %v", b, err)
				}
				return
			}
			c, u, p, comp, e := reference(b)
			if got.Content != c || got.Usage != u || got.Error != e {
				t.Fatalf("%q: got %+v, want content=%v usage=%v error=%v", b, got, c, u, e)
			}
			if u && isPlainInts(b) && (got.PromptTokens != p || got.CompletionTokens != comp) {
				t.Fatalf("%q: tokens %d/%d, want %d/%d", b, got.PromptTokens, got.CompletionTokens, p, comp)
			}
		}
	})
}

// isPlainInts is true when the usage numbers cannot be floats or duplicates
// (where the walker and encoding/json may legitimately differ).
func isPlainInts(b []byte) bool {
	return !bytes.ContainsAny(b, ".eE\\") && bytes.Count(b, []byte("tokens")) <= 2 && bytes.Count(b, []byte("usage")) <= 1
}

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\r\nevent: x\r\ndata: a\r\ndata: b\r\n\r\n"))
	f.Add([]byte("data"))
	f.Fuzz(func(t *testing.T, b []byte) {
		const max = 64
		r := newSSEReader(bytes.NewReader(b), max)
		total := 0
		for range len(b) + 2 {
			d, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errStreamTooLong) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(d) > max {
				t.Fatalf("event of %d bytes past the limit %d", len(d), max)
			}
			total += len(d)
			if total > len(b) {
				t.Fatalf("more data out (%d) than in (%d)", total, len(b))
			}
		}
		t.Fatalf("reader did not reach EOF on %d bytes", len(b))
	})
}
