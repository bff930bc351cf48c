// Package bounded is the one place where untrusted YAML and JSON (files a
// user names, request bodies, fields of request bodies) meets a parser.
//
// goccy/go-yaml spends memory quadratic in nesting depth (a 200 KB
// `[[[...]]]` took 15 GB) and expands aliases into copies (an alias bomb),
// so before any parser sees a document a cheap byte scan that allocates
// nothing checks its size, nesting depth, node count and aliases against
// Limits. A document that has aliases is then parsed into a syntax tree,
// which keeps aliases as references, and its node count with every alias
// expanded is checked too. A refusal is a *LimitError naming the file or
// request field, the line and the limit; errors.Is(err, ErrLimit) holds.
//
// Files are refused by their size before they are read (ReadFile).
package bounded
