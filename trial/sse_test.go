package trial

import (
	"bufio"
	"bytes"
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
		{"escaped key", `{"choic\u0065s":[{"text":"a"}]}`, chunk{Content: true}, false},
		{"empty choice", `{"choices":[{}]}`, chunk{}, false},
		{"folded keys", `{"choiceſ":[{"TEXT":"a"}],"USAGE":{"completion_toKens":2}}`, chunk{Content: true, Usage: true, CompletionTokens: 2}, false},
		{"last duplicate wins", `{"choices":[{"text":"a"}],"choices":[]}`, chunk{}, false},
		{"float count", `{"usage":{"completion_tokens":2.0}}`, chunk{Usage: true}, false},
		{"openai last chunk", `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}]}`, chunk{}, false},
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
