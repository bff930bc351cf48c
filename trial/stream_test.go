package trial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recordedStreams are the stream shapes of ../shared/reference/vllm.md
// §3.2 and of OpenAI's API, one file per shape in testdata/streams, each
// the answer to a request for 5 tokens from a 4-token prompt: what the
// client must make of them.
var recordedStreams = []struct {
	file     string
	chunks   int    // token chunks (chunks that carry text)
	out      int    // output tokens
	prompt   int    // prompt tokens (the usage chunk's, else the request's)
	class    string // error class; "": the request succeeds
	stampEnd bool
}{
	{"vllm-completions-usage.sse", 5, 5, 12, "", true},
	{"vllm-completions-nousage.sse", 5, 5, 4, "", true},
	{"vllm-completions-holdback.sse", 4, 5, 12, "", true},        // an empty chunk holds back half a character
	{"vllm-completions-stream-interval.sse", 3, 5, 12, "", true}, // --stream-interval 2
	{"vllm-completions-continuous-usage.sse", 5, 5, 12, "", true},
	{"vllm-completions-error.sse", 2, 0, 4, ReqErrEngine, false},
	{"vllm-completions-error-flat.sse", 2, 0, 4, ReqErrEngine, false},
	{"openai-completions-usage.sse", 5, 5, 12, "", true}, // ends with an empty-text chunk carrying finish_reason
	{"openai-completions-nousage.sse", 5, 5, 4, "", true},
	{"vllm-chat-usage.sse", 5, 5, 12, "", true}, // a role-only first chunk
	{"vllm-chat-nousage.sse", 5, 5, 4, "", true},
	{"vllm-chat-reasoning.sse", 5, 5, 12, "", true},
	{"vllm-chat-stream-interval.sse", 3, 5, 12, "", true},
	{"vllm-chat-continuous-usage.sse", 5, 5, 12, "", true},
	{"vllm-chat-error.sse", 2, 0, 4, ReqErrEngine, false},
	{"openai-chat-usage.sse", 5, 5, 12, "", true}, // ends with an empty delta carrying finish_reason
	{"openai-chat-nousage.sse", 5, 5, 4, "", true},
}

var recordedSpec = RequestSpec{PromptLen: 4, OutputLen: 5}

func streamEndpoint(file string) Endpoint {
	if strings.Contains(file, "-chat-") {
		return EndpointChat
	}
	return EndpointCompletions
}

func readStreamFile(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "streams", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replayServer answers the endpoint's path with body, one event per write
// and flush (as a server streams them), and 404 on any other path.
func replayServer(t *testing.T, ep Endpoint, body []byte) string {
	t.Helper()
	path := "/v1/completions"
	if ep == EndpointChat {
		path = "/v1/chat/completions"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for ev := range strings.SplitAfterSeq(string(body), "\n\n") {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRecordedStreams replays every recorded stream through the real HTTP
// client: only chunks with text are tokens (not OpenAI's empty last chunk,
// vLLM's hold-back chunk, the role-only chat chunk, the usage chunk or
// [DONE]); output tokens come from usage when present; the usage check
// passes on every honest stream.
func TestRecordedStreams(t *testing.T) {
	for _, tt := range recordedStreams {
		t.Run(strings.TrimSuffix(tt.file, ".sse"), func(t *testing.T) {
			ep := streamEndpoint(tt.file)
			c := NewClient(replayServer(t, ep, readStreamFile(t, tt.file)), "m", 10*time.Second, WithEndpoint(ep))
			defer c.Close()
			rec := c.Do(context.Background(), recordedSpec, time.Now())
			if got := class(rec); got != tt.class {
				t.Fatalf("class %q (Err %q), want %q", got, rec.Err, tt.class)
			}
			if len(rec.Chunks) != tt.chunks {
				t.Errorf("%d token chunks, want %d", len(rec.Chunks), tt.chunks)
			}
			if tt.class != "" {
				return
			}
			if rec.OutputLen != tt.out || rec.PromptLen != tt.prompt || rec.TokenMismatch {
				t.Errorf("output %d prompt %d mismatch %v, want %d %d false", rec.OutputLen, rec.PromptLen, rec.TokenMismatch, tt.out, tt.prompt)
			}
			if tt.stampEnd && rec.End != rec.Chunks[len(rec.Chunks)-1] {
				t.Errorf("end %v, want the last token chunk's %v", rec.End, rec.Chunks[len(rec.Chunks)-1])
			}
			if m := Summarize([]Record{rec}, nil); m.Failed != 0 || m.TotalOutputTokens != tt.out {
				t.Errorf("metrics: failed %d, output tokens %d", m.Failed, m.TotalOutputTokens)
			}
		})
	}
}

// refChunk is encoding/json's reading of an event, the reference the fast
// parsers are held to: each level decoded into a struct of
// json.RawMessage fields (keys matched case-insensitively with Unicode
// folding, the last of repeated keys winning), token counts into ints.
func refChunk(b []byte, chat bool) (c chunk, ok bool) {
	var top struct {
		Choices, Usage, Error, Object, Message json.RawMessage
	}
	if json.Unmarshal(b, &top) != nil {
		return c, false
	}
	var choices []json.RawMessage
	if json.Unmarshal(top.Choices, &choices) == nil && len(choices) > 0 {
		var first struct{ Text, Delta json.RawMessage }
		if json.Unmarshal(choices[0], &first) == nil {
			if chat {
				var d struct {
					Content   json.RawMessage
					Reasoning json.RawMessage `json:"reasoning_content"`
				}
				c.Content = json.Unmarshal(first.Delta, &d) == nil && (refText(d.Content) || refText(d.Reasoning))
			} else {
				c.Content = refText(first.Text)
			}
		}
	}
	var u map[string]json.RawMessage
	if json.Unmarshal(top.Usage, &u) == nil && u != nil {
		var n struct {
			Prompt     json.RawMessage `json:"prompt_tokens"`
			Completion json.RawMessage `json:"completion_tokens"`
		}
		json.Unmarshal(top.Usage, &n)
		c.Usage = true
		json.Unmarshal(n.Prompt, &c.PromptTokens)
		json.Unmarshal(n.Completion, &c.CompletionTokens)
	}
	var object string
	c.Error = len(top.Error) > 0 && string(top.Error) != "null" ||
		json.Unmarshal(top.Object, &object) == nil && object == "error"
	return c, true
}

func refText(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s != ""
}

// checkAgainstRef fails t when the fast parser's reading of b differs from
// encoding/json's. Invalid JSON may get any answer but a panic; valid JSON
// may be refused only for nesting past the walker's limit.
func checkAgainstRef(t *testing.T, b []byte, chat bool) {
	t.Helper()
	parse := parseChunk
	if chat {
		parse = parseChatChunk
	}
	got, err := parse(b)
	if !json.Valid(b) || !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return
	}
	if err != nil {
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < 512 {
			t.Fatalf("rejected valid JSON %q: %v", b, err)
		}
		return
	}
	want, _ := refChunk(b, chat)
	got.Message = ""
	if got != want {
		t.Fatalf("%q:\n got %+v\nwant %+v", b, got, want)
	}
}

// TestParseAgreesWithEncodingJSON pins the cases where a hand-written
// walker most easily parts from encoding/json.
func TestParseAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"Choices":[{"text":"a"}]}`,
		`{"CHOICES":[{"TEXT":"a"}]}`,
		`{"choiceſ":[{"text":"a"}]}`, // U+017F folds to s
		`{"choices":[{"text":"a"}],"choices":[]}`,
		`{"choices":[],"Choices":[{"text":"a"}]}`,
		`{"choices":[{"text":"a","text":""}]}`,
		`{"choices":[{"text":"","Text":"a"}]}`,
		`{"choices":[{"delta":{"content":"a"}}]}`,
		`{"usage":{"prompt_toKens":3,"completion_tokens":2},"usage":null}`, // U+212A Kelvin sign folds to k
		`{"usage":{"completion_tokens":2,"completion_tokens":1e2}}`,
		`{"usage":{"completion_tokens":2.0}}`,
		`{"usage":{"completion_tokens":99999999999999999999}}`,
		`{"usage":{"completion_tokens":"3"}}`,
		`{"usage":5}`,
		`{"object":"\u0065rror","message":"x"}`,
		`{"OBJECT":"error"}`,
		`{"error":null,"Error":{"message":"x"}}`,
		`{"error":{"message":"x"},"error":null}`,
		`{"choices":[null]}`,
		`{"choices":null}`,
		`{"\u0063hoices":[{"t\u0065xt":"\n"}]}`,
		`{"choices":[{"Delta":{"CONTENT":"a","content":""}}]}`,
		`{"choices":[{"delta":{"content":"","reasoning_content":"a"}}]}`,
		`{"choices":[{"delta":{"content":"a"},"delta":{}}]}`,
		`{"choices":[{"delta":{"reaſoning_content":"a"}}]}`,
		`{"choices":[{"delta":{"content":5}}]}`,
	} {
		for _, chat := range []bool{false, true} {
			b := []byte(in)
			t.Run(in, func(t *testing.T) { checkAgainstRef(t, b, chat) })
		}
	}
}

// streamEvents is every event's data in the recorded streams of an
// endpoint, the fuzzers' seeds.
func streamEvents(t testing.TB, chat bool) [][]byte {
	var out [][]byte
	for _, s := range recordedStreams {
		if (streamEndpoint(s.file) == EndpointChat) != chat {
			continue
		}
		r := newSSEReader(bytes.NewReader(readStreamFile(t, s.file)), 0)
		for {
			d, err := r.Next()
			if err != nil {
				break
			}
			out = append(out, bytes.Clone(d))
		}
	}
	return out
}

func FuzzParseChunk(f *testing.F) {
	for _, ev := range streamEvents(f, false) {
		f.Add(ev)
	}
	for _, s := range []string{
		`{"a":[1,2,{"b":"c"}],"choices":[[]],"usage":{"completion_tokens":1e2}}`,
		`{"choices":[{"text":"\"choices\":[]"}]}`,
		`{"Choices":[{"TEXT":"a"}],"choiceſ":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstRef(t, b, false) })
}

func FuzzParseChatChunk(f *testing.F) {
	for _, ev := range streamEvents(f, true) {
		f.Add(ev)
	}
	for _, s := range []string{
		`{"choices":[{"delta":{"reasoning_content":"x","content":null}}]}`,
		`{"CHOICES":[{"Delta":{"Content":"a"}}],"choices":[[]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstRef(t, b, true) })
}

// FuzzReadStream reads whole response bodies as the client does and holds
// the result to encoding/json's reading of each event: the token chunks
// up to [DONE], an error event or the event cap, the output tokens and the
// error.
func FuzzReadStream(f *testing.F) {
	for _, s := range recordedStreams {
		f.Add(readStreamFile(f, s.file), streamEndpoint(s.file) == EndpointChat)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		parse := parseChunk
		if chat {
			parse = parseChatChunk
		}
		var rec Record
		rec.Requested = recordedSpec.OutputLen
		readStream(context.Background(), newSSEReader(bytes.NewReader(body), 256), parse, recordedSpec, time.Now(), &rec)
		if len(rec.Chunks) > len(body) {
			t.Fatalf("%d token chunks from %d bytes", len(rec.Chunks), len(body))
		}
		if rec.Err == "" && (len(rec.Chunks) == 0 || rec.OutputLen < len(rec.Chunks) || rec.OutputLen > rec.Requested) {
			t.Fatalf("accepted %d chunks for %d output tokens of %d asked", len(rec.Chunks), rec.OutputLen, rec.Requested)
		}
		// The reference: the same events, each read by encoding/json.
		r := newSSEReader(bytes.NewReader(body), 256)
		chunks, usage, engineErr := 0, -1, false
		limit := maxEvents(recordedSpec)
		for events := 1; ; events++ {
			d, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					return // framing errors end both the same way; nothing to compare
				}
				break
			}
			if events > limit {
				break
			}
			if bytes.Equal(bytes.TrimSpace(d), []byte("[DONE]")) {
				break
			}
			if !json.Valid(d) || !bytes.HasPrefix(bytes.TrimSpace(d), []byte("{")) || bytes.Count(d, []byte("["))+bytes.Count(d, []byte("{")) >= 512 {
				return // malformed: the client fails the request; the reference has no answer
			}
			c, _ := refChunk(d, chat)
			if c.Error {
				engineErr = true
				break
			}
			if c.Content {
				chunks++
			}
			if c.Usage {
				usage = c.CompletionTokens
			}
		}
		if len(rec.Chunks) != chunks {
			t.Fatalf("%d token chunks, encoding/json reads %d (Err %q)", len(rec.Chunks), chunks, rec.Err)
		}
		if got := strings.HasPrefix(rec.Err, "engine error: "); got != engineErr {
			t.Fatalf("engine error %v (Err %q), encoding/json reads %v", got, rec.Err, engineErr)
		}
		if rec.Err == "" && usage >= 0 && rec.OutputLen != usage {
			t.Fatalf("output tokens %d, usage says %d", rec.OutputLen, usage)
		}
	})
}
