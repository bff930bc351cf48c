package trial

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// DefaultMaxLineBytes bounds one SSE line and one event's data (vLLM's
// chunks are a few hundred bytes; a longer line is a broken or hostile
// server, and buffering it unbounded let one stream take gigabytes).
const DefaultMaxLineBytes = 1 << 20

// errStreamTooLong is returned by sseReader.Next for a line or event over
// its limit; the caller fails the request and drops the connection, so the
// rest of the line is never read.
var errStreamTooLong = errors.New("line over the limit")

// sseReader reads the data payloads of a Server-Sent Events stream. It is
// the hot path of the load generator, so it reuses one buffer and allocates
// only for lines longer than the bufio buffer or multi-line events, never
// past max bytes.
type sseReader struct {
	br   *bufio.Reader
	src  stampReader
	max  int    // longest line or event data, in bytes
	data []byte // payload of the event being assembled
	long []byte // a line longer than the bufio buffer
}

func newSSEReader(r io.Reader, max int) *sseReader {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	s := &sseReader{max: max}
	s.src.r = r
	s.br = bufio.NewReaderSize(&s.src, 16<<10)
	return s
}

// stampReader notes when each read that returned data came back.
type stampReader struct {
	r  io.Reader
	at time.Time
}

func (s *stampReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.at = time.Now()
	}
	return n, err
}

// keepBytes is the largest scratch buffer a pooled reader keeps: a rare
// long line must not pin its megabyte in every idle reader of the pool.
const keepBytes = 64 << 10

// at is when the read that completed the last event returned.
func (s *sseReader) at() time.Time { return s.src.at }

func (s *sseReader) reset(r io.Reader) {
	s.src = stampReader{r: r}
	s.br.Reset(&s.src)
	s.data = s.data[:0]
	if cap(s.data) > keepBytes {
		s.data = nil
	}
	if cap(s.long) > keepBytes {
		s.long = nil
	}
}

// Next returns the data of the next event (several data lines joined by
// "\n", as the SSE spec says), or io.EOF at the end of the stream. Comment
// lines (":...") and other fields (event, id, retry) are skipped; an event
// without data lines is not returned. The returned slice is valid until
// the next call. A final event without its blank line is still returned.
// A line or an event's data longer than the limit is errStreamTooLong.
func (s *sseReader) Next() ([]byte, error) {
	s.data = s.data[:0]
	have := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && have {
				return s.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if have {
				return s.data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue
		}
		if len(s.data)+1+len(value) > s.max {
			return nil, fmt.Errorf("event data: %w (%d bytes)", errStreamTooLong, s.max)
		}
		if have {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		have = true
	}
}

// readLine returns one line without its "\n" or "\r\n" terminator. A line
// over the limit is an error as soon as the limit is passed: what follows
// is left unread.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.br.ReadSlice('\n')
			if len(s.long)+len(line) > s.max+2 { // +2: the terminator
				return nil, fmt.Errorf("line: %w (%d bytes)", errStreamTooLong, s.max)
			}
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > s.max {
		return nil, fmt.Errorf("line: %w (%d bytes)", errStreamTooLong, s.max)
	}
	return line, nil
}

// chunk is what the load generator needs from one streamed completion event.
type chunk struct {
	Done             bool // the "[DONE]" sentinel
	Content          bool // the first choice carries text: a token chunk
	Usage            bool // a usage object was present
	PromptTokens     int
	CompletionTokens int
	Error            bool   // an error event ({"error":{...}} or {"object":"error",...})
	Message          string // the error message, when Error
}

var errMalformed = errors.New("malformed chunk")

// parseChunk reads an OpenAI completion stream event without decoding it
// fully. Content is set when the first choice's "text" is a non-empty
// string: OpenAI's last chunk (empty text with a finish_reason), vLLM's
// hold-back chunks (an incomplete UTF-8 sequence or stop string) and the
// usage chunk ("choices": []) carry none, and a chunk is not a token
// (../shared/reference/vllm.md §3.2).
func parseChunk(b []byte) (chunk, error) { return parseEvent(b, false) }

// parseChatChunk reads a chat completion stream event: Content is set when
// the first choice's delta carries text (content or reasoning_content), so
// the role-only first chunk ("content":"") and the empty last delta with
// its finish_reason are not tokens.
func parseChatChunk(b []byte) (chunk, error) { return parseEvent(b, true) }

// parseEvent reads the keys as encoding/json decodes them into a struct of
// json.RawMessage fields: names matched case-insensitively (Unicode simple
// folding, as bytes.EqualFold), a repeated key replacing the earlier value,
// integers as an int field takes them (anything else counts 0). The fuzz
// tests hold it to that reference.
func parseEvent(b []byte, chat bool) (chunk, error) {
	var c chunk
	i := skipWS(b, 0)
	if bytes.Equal(bytes.TrimRight(b[i:], " \t\r\n"), []byte("[DONE]")) {
		c.Done = true
		return c, nil
	}
	if i >= len(b) || b[i] != '{' {
		return c, errMalformed
	}
	var message []byte
	flatError := false
	err := walkObject(b, i, func(key []byte, vs, ve int) error {
		v := b[vs:ve]
		switch {
		case keyIs(key, "choices"):
			c.Content = firstChoiceText(b, vs, chat)
		case keyIs(key, "usage"):
			c.Usage, c.PromptTokens, c.CompletionTokens = false, 0, 0
			if v[0] != '{' {
				return nil
			}
			c.Usage = true
			return walkObject(b, vs, func(k []byte, s, e int) error {
				switch {
				case keyIs(k, "prompt_tokens"):
					c.PromptTokens = jsonInt(b[s:e])
				case keyIs(k, "completion_tokens"):
					c.CompletionTokens = jsonInt(b[s:e])
				}
				return nil
			})
		case keyIs(key, "error"):
			c.Error, c.Message = false, ""
			if string(v) == "null" {
				return nil
			}
			c.Error = true
			c.Message = errorMessage(v)
		case keyIs(key, "object"):
			flatError = isString(v, "error")
		case keyIs(key, "message"):
			message = v
		}
		return nil
	})
	if err != nil {
		return chunk{}, err
	}
	if flatError && !c.Error {
		c.Error = true
		c.Message = jsonString(message)
	}
	return c, nil
}

// keyIs matches an object key to a field name as encoding/json does.
func keyIs(key []byte, name string) bool {
	return string(key) == name || bytes.EqualFold(key, []byte(name))
}

// isString reports whether the JSON value v is the string s (escapes
// decoded).
func isString(v []byte, s string) bool {
	if len(v) == 0 || v[0] != '"' {
		return false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1:len(v)-1]) == s
	}
	return jsonString(v) == s
}

// firstChoiceText reports whether the "choices" value at b[i] is an array
// whose first element carries text: a non-empty "text" string
// (completions), or a "delta" object with a non-empty "content" or
// "reasoning_content" string (chat).
func firstChoiceText(b []byte, i int, chat bool) bool {
	if b[i] != '[' {
		return false
	}
	j := skipWS(b, i+1)
	if b[j] != '{' {
		return false
	}
	text := false
	walkObject(b, j, func(key []byte, vs, ve int) error {
		switch {
		case !chat && keyIs(key, "text"):
			text = nonEmptyString(b[vs:ve])
		case chat && keyIs(key, "delta"):
			text = deltaText(b, vs)
		}
		return nil
	})
	return text
}

// deltaText reports whether the delta value at b[i] is an object with a
// non-empty "content" or "reasoning_content" string (each key's last
// value counting).
func deltaText(b []byte, i int) bool {
	if b[i] != '{' {
		return false
	}
	content, reasoning := false, false
	walkObject(b, i, func(k []byte, s, e int) error {
		switch {
		case keyIs(k, "content"):
			content = nonEmptyString(b[s:e])
		case keyIs(k, "reasoning_content"):
			reasoning = nonEmptyString(b[s:e])
		}
		return nil
	})
	return content || reasoning
}

// nonEmptyString: v is a JSON string of at least one character (an escape
// always decodes to one).
func nonEmptyString(v []byte) bool { return len(v) > 2 && v[0] == '"' }

// walkObject calls fn for each key of the object starting at b[i] ('{')
// with the value's byte range, and checks that only whitespace follows
// when the object is the top level (i == first non-space byte).
func walkObject(b []byte, i int, fn func(key []byte, vs, ve int) error) error {
	top := skipWS(b, 0) == i
	i++
	first := true
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return errMalformed
		}
		if b[i] == '}' {
			if !first {
				return errMalformed // trailing comma
			}
			i++
			break
		}
		if b[i] != '"' {
			return errMalformed
		}
		ks := i
		ke, err := scanString(b, i)
		if err != nil {
			return err
		}
		key := b[ks+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(b[ks:ke], &s) != nil {
				return errMalformed
			}
			key = []byte(s)
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return errMalformed
		}
		vs := skipWS(b, i+1)
		ve, err := skipValue(b, vs)
		if err != nil {
			return err
		}
		if err := fn(key, vs, ve); err != nil {
			return err
		}
		first = false
		i = skipWS(b, ve)
		if i >= len(b) {
			return errMalformed
		}
		if b[i] == ',' {
			i++
			j := skipWS(b, i)
			if j < len(b) && b[j] == '}' {
				return errMalformed
			}
			continue
		}
		if b[i] != '}' {
			return errMalformed
		}
		i++
		break
	}
	if top && skipWS(b, i) != len(b) {
		return errMalformed
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index just past the string starting at b[i] ('"').
func scanString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			i++
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, errMalformed
		}
	}
	return 0, errMalformed
}

// skipValue returns the index just past the JSON value starting at b[i].
// Containers are matched by depth (strings respected); scalars must be a
// number or true/false/null.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errMalformed
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		var st [64]byte
		stack := st[:0]
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				e, err := scanString(b, i)
				if err != nil {
					return 0, err
				}
				i = e
				continue
			case '{', '[':
				if len(stack) >= 512 {
					return 0, errMalformed
				}
				stack = append(stack, c)
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != opener(c) {
					return 0, errMalformed
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errMalformed
	}
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	switch s := b[i:j]; {
	case string(s) == "true", string(s) == "false", string(s) == "null":
	case len(s) > 0 && (s[0] == '-' || s[0] >= '0' && s[0] <= '9'):
		if _, err := strconv.ParseFloat(string(s), 64); err != nil {
			return 0, errMalformed
		}
	default:
		return 0, errMalformed
	}
	return j, nil
}

func opener(c byte) byte {
	if c == '}' {
		return '{'
	}
	return '['
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}

// jsonInt reads a JSON number as encoding/json fills an int: an integer
// literal in range, else 0 (1e2, 1.0 and overflows are type errors there).
func jsonInt(v []byte) int {
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return 0
	}
	return n
}

func jsonString(v []byte) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return string(v)
	}
	return s
}

// errorMessage extracts the message of an "error" value: a string, or an
// object with a "message" field (vLLM >= 0.10.1).
func errorMessage(v []byte) string {
	if len(v) > 0 && v[0] == '"' {
		return jsonString(v)
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(v, &e) == nil && e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("%.200s", v)
}
