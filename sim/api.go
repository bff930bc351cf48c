package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
)

// apiRequest is a decoded /v1/completions or /v1/chat/completions body,
// reduced to what the simulator needs.
type apiRequest struct {
	Chat         bool
	Model        string
	PromptTokens int
	TokenIDs     []int // the prompt as token ids, when given so
	Text         string
	MaxTokens    int // -1: not given
	MinTokens    int
	IgnoreEOS    bool
	Stream       bool
	IncludeUsage bool
	Priority     int
}

// apiError is an OpenAI-style error with its HTTP status.
type apiError struct {
	Status  int
	Type    string
	Message string
	Param   string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{Status: 400, Type: "BadRequestError", Message: fmt.Sprintf(format, args...)}
}

type rawCompletion struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           *int            `json:"min_tokens"`
	IgnoreEOS           *bool           `json:"ignore_eos"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Priority *int `json:"priority"`
	N        *int `json:"n"`
}

type rawMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type rawPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// textTokens approximates the token count of a text prompt: about four
// bytes of UTF-8 per token (the rule of thumb for English BPE vocabularies),
// at least one token for a non-empty text.
func textTokens(s string) int {
	if s == "" {
		return 0
	}
	return (len(s) + 3) / 4
}

// chatTemplateTokens is what the chat template adds per message (role
// header and separators of Llama-3's template).
const chatTemplateTokens = 4

// decodeRequest parses a request body. chat selects the chat schema.
func decodeRequest(body []byte, chat bool) (apiRequest, error) {
	var raw rawCompletion
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return apiRequest{}, badRequest("Invalid JSON body: %v", err)
	}
	if dec.More() {
		return apiRequest{}, badRequest("Invalid JSON body: trailing data")
	}
	r := apiRequest{Chat: chat, Model: raw.Model, MaxTokens: -1}
	if chat {
		if err := decodeMessages(raw.Messages, &r); err != nil {
			return r, err
		}
		if raw.MaxCompletionTokens != nil {
			r.MaxTokens = *raw.MaxCompletionTokens
		} else if raw.MaxTokens != nil {
			r.MaxTokens = *raw.MaxTokens
		}
	} else {
		if err := decodePrompt(raw.Prompt, &r); err != nil {
			return r, err
		}
		r.MaxTokens = 16 // vLLM's completions default
		if raw.MaxTokens != nil {
			r.MaxTokens = *raw.MaxTokens
		}
	}
	if raw.MaxTokens != nil && *raw.MaxTokens < 1 || raw.MaxCompletionTokens != nil && *raw.MaxCompletionTokens < 1 {
		return r, &apiError{Status: 400, Type: "BadRequestError", Param: "max_tokens", Message: "max_tokens must be at least 1, got " + strconv.Itoa(r.MaxTokens) + "."}
	}
	if raw.MinTokens != nil {
		if *raw.MinTokens < 0 {
			return r, badRequest("min_tokens must be greater than or equal to 0, got %d.", *raw.MinTokens)
		}
		r.MinTokens = *raw.MinTokens
	}
	if r.MaxTokens > 0 && r.MinTokens > r.MaxTokens {
		return r, badRequest("min_tokens must be less than or equal to max_tokens=%d, got %d.", r.MaxTokens, r.MinTokens)
	}
	if raw.N != nil && *raw.N != 1 {
		return r, badRequest("n=%d is not supported by the simulator; use n=1.", *raw.N)
	}
	r.IgnoreEOS = raw.IgnoreEOS != nil && *raw.IgnoreEOS
	r.Stream = raw.Stream != nil && *raw.Stream
	if raw.StreamOptions != nil {
		if !r.Stream {
			return r, badRequest("Stream options can only be defined when `stream=True`.")
		}
		r.IncludeUsage = raw.StreamOptions.IncludeUsage != nil && *raw.StreamOptions.IncludeUsage
	}
	if raw.Priority != nil {
		r.Priority = *raw.Priority
	}
	return r, nil
}

func decodePrompt(p json.RawMessage, r *apiRequest) error {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || string(p) == "null" {
		return badRequest("Either prompt or prompt_embeds must be provided and non-empty.")
	}
	switch p[0] {
	case '"':
		var s string
		if err := json.Unmarshal(p, &s); err != nil {
			return badRequest("prompt: %v", err)
		}
		r.Text = s
		r.PromptTokens = textTokens(s)
	case '[':
		var ids []int
		if err := json.Unmarshal(p, &ids); err == nil {
			r.TokenIDs = ids
			r.PromptTokens = len(ids)
			break
		}
		var strs []string
		if err := json.Unmarshal(p, &strs); err == nil && len(strs) == 1 {
			r.Text = strs[0]
			r.PromptTokens = textTokens(strs[0])
			break
		}
		var nested [][]int
		if err := json.Unmarshal(p, &nested); err == nil && len(nested) == 1 {
			r.TokenIDs = nested[0]
			r.PromptTokens = len(nested[0])
			break
		}
		return badRequest("prompt must be a string, a list of token ids, or a single-element list of either (batched prompts are not supported by the simulator)")
	default:
		return badRequest("prompt must be a string or a list of token ids")
	}
	for _, id := range r.TokenIDs {
		if id < 0 {
			return badRequest("Token id %d is out of vocabulary", id)
		}
	}
	if r.PromptTokens == 0 {
		return badRequest("The prompt cannot be empty.")
	}
	return nil
}

func decodeMessages(m json.RawMessage, r *apiRequest) error {
	var msgs []rawMessage
	if err := json.Unmarshal(m, &msgs); err != nil || len(msgs) == 0 {
		return badRequest("messages must be a non-empty list of {role, content} objects")
	}
	var text bytes.Buffer
	for _, msg := range msgs {
		c := bytes.TrimSpace(msg.Content)
		switch {
		case len(c) == 0 || string(c) == "null":
		case c[0] == '"':
			var s string
			if err := json.Unmarshal(c, &s); err != nil {
				return badRequest("messages.content: %v", err)
			}
			text.WriteString(s)
		case c[0] == '[':
			var parts []rawPart
			if err := json.Unmarshal(c, &parts); err != nil {
				return badRequest("messages.content: %v", err)
			}
			for _, p := range parts {
				if p.Type != "text" && p.Type != "" {
					return badRequest("content part type %q is not supported by the simulator", p.Type)
				}
				text.WriteString(p.Text)
			}
		default:
			return badRequest("messages.content must be a string or a list of parts")
		}
		r.PromptTokens += chatTemplateTokens
	}
	r.Text = text.String()
	r.PromptTokens += textTokens(r.Text)
	return nil
}

// promptKeys hashes the prompt's full blocks (chained, as vLLM's block
// hashes are) so that requests sharing a prefix share cache blocks.
func promptKeys(req apiRequest, blockSize int) []uint64 {
	n := req.PromptTokens / blockSize
	if n == 0 {
		return []uint64{}
	}
	keys := make([]uint64, n)
	h := fnv.New64a()
	var buf [8]byte
	if req.TokenIDs != nil {
		for i := 0; i < n; i++ {
			for _, id := range req.TokenIDs[i*blockSize : (i+1)*blockSize] {
				putUint64(buf[:], uint64(id))
				h.Write(buf[:])
			}
			keys[i] = h.Sum64() | 1<<63
		}
		return keys
	}
	// Text: about four bytes per token, so a block covers 4 x blockSize bytes.
	s := req.Text
	for i := 0; i < n; i++ {
		lo, hi := min(len(s), i*4*blockSize), min(len(s), (i+1)*4*blockSize)
		h.Write([]byte(s[lo:hi]))
		putUint64(buf[:], uint64(i))
		h.Write(buf[:])
		keys[i] = h.Sum64() | 1<<63
	}
	return keys
}

func putUint64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// errorBody renders an error the way the emulated vLLM version does: nested
// {"error": {...}} from 0.10.1 on, flat before.
func errorBody(e *apiError, nested bool) []byte {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	inner := map[string]any{"message": e.Message, "type": e.Type, "param": param, "code": e.Status}
	var b []byte
	if nested {
		b, _ = json.Marshal(map[string]any{"error": inner})
	} else {
		inner["object"] = "error"
		b, _ = json.Marshal(inner)
	}
	return b
}

// asAPIError converts any error into an apiError (500 when not one).
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return &apiError{Status: 500, Type: "InternalServerError", Message: err.Error()}
}

// tokenWords is the simulated vocabulary of generated text.
var tokenWords = []string{" the", " of", " and", " to", " a", " in", " is", " that", " for", " it",
	" as", " with", " was", " on", " be", " by", " at", " this", " from", " or"}

// appendTokens appends n generated tokens of text starting at position pos.
func appendTokens(b []byte, pos, n int) []byte {
	for i := 0; i < n; i++ {
		b = append(b, tokenWords[(pos+i)%len(tokenWords)]...)
	}
	return b
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
			break
		}
	}
	if plain {
		return strconv.AppendQuote(b, s) // Go and JSON quote printable ASCII alike
	}
	j, _ := json.Marshal(s)
	return append(b, j...)
}
