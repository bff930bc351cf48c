package bounded

import (
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// CheckYAML checks a YAML document (every document of a stream) against l.
// The scan over-counts rather than under-counts: a line's depth is its
// block indentation levels plus its "- " entries plus open flow brackets;
// every plain or quoted scalar, collection start and alias is a node.
func CheckYAML(source string, b []byte, l Limits) error {
	if l.Bytes > 0 && int64(len(b)) > l.Bytes {
		return &LimitError{Source: source, What: "size", Limit: l.Bytes}
	}
	s := yamlScan{l: l, src: source, indents: make([]int, 0, 16)}
	if err := s.run(b); err != nil {
		return err
	}
	if s.aliases > 0 && l.Nodes > 0 {
		return expandedNodes(source, b, l)
	}
	return nil
}

type yamlScan struct {
	l       Limits
	src     string
	line    int
	nodes   int
	aliases int
	indents []int // open block indentation levels
}

func (s *yamlScan) fail(what string, limit int) error {
	return &LimitError{Source: s.src, Line: s.line, What: what, Limit: int64(limit)}
}

func (s *yamlScan) node() error {
	s.nodes++
	if s.l.Nodes > 0 && s.nodes > s.l.Nodes {
		return s.fail("node count", s.l.Nodes)
	}
	return nil
}

func (s *yamlScan) depth(d int) error {
	if s.l.Depth > 0 && d > s.l.Depth {
		return s.fail("nesting depth", s.l.Depth)
	}
	return nil
}

// run scans line by line. State carried across lines: an open quoted
// scalar, open flow collections, a block scalar's body (skipped), and the
// stack of block indentation levels.
func (s *yamlScan) run(b []byte) error {
	var (
		quote     byte // '"' or '\'' while inside a quoted scalar
		flow      int  // open [ and {
		blockBody = -1 // indentation a block scalar's lines exceed; -1 when none
	)
	for start := 0; start < len(b); {
		end := start
		for end < len(b) && b[end] != '\n' {
			end++
		}
		line := b[start:end]
		start = end + 1
		s.line++
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		blank := indent == len(line) || line[indent] == '\r'
		if blockBody >= 0 {
			if blank || indent > blockBody {
				continue
			}
			blockBody = -1
		}
		if quote == 0 && (blank || line[indent] == '#') {
			continue
		}
		if quote == 0 && flow == 0 {
			n := len(s.indents)
			for n > 0 && s.indents[n-1] > indent {
				n--
			}
			s.indents = s.indents[:n]
			if n == 0 || s.indents[n-1] < indent {
				s.indents = append(s.indents, indent)
				if err := s.depth(n + 1); err != nil {
					return err
				}
			}
		}
		dashes := 0
		tokenStart, plain := true, false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if quote != 0 {
				switch {
				case quote == '"' && c == '\\':
					i++
				case c == quote && quote == '\'' && i+1 < len(line) && line[i+1] == '\'':
					i++
				case c == quote:
					quote, tokenStart = 0, false
				}
				continue
			}
			next := byte(' ')
			if i+1 < len(line) {
				next = line[i+1]
			}
			space := next == ' ' || next == '\t' || next == '\r'
			if c == ' ' || c == '\t' {
				if next == '#' {
					break // a comment to the end of the line
				}
				if !plain {
					tokenStart = true
				}
				continue
			}
			if plain {
				switch {
				case c == ':' && space:
					plain, tokenStart = false, true
				case flow > 0 && (c == ',' || c == '[' || c == ']' || c == '{' || c == '}'):
					plain = false
					i-- // the indicator is read again, outside the scalar
				}
				continue
			}
			switch {
			case c == '[' || c == '{':
				flow++
				if err := s.node(); err != nil {
					return err
				}
				if err := s.depth(len(s.indents) + dashes + flow); err != nil {
					return err
				}
				tokenStart = true
			case c == ']' || c == '}':
				if flow > 0 {
					flow--
				}
				tokenStart = false
			case c == ',' && flow > 0:
				tokenStart = true
			case !tokenStart:
				// the rest of a token this scan does not need (a quoted
				// key's colon is handled below)
				if c == ':' && space {
					tokenStart = true
				}
			case c == '#':
				i = len(line)
			case (c == '-' || c == '?' || c == ':') && space:
				if c == '-' && flow == 0 {
					dashes++
					if err := s.depth(len(s.indents) + dashes); err != nil {
						return err
					}
				}
			case c == '"' || c == '\'':
				quote = c
				if err := s.node(); err != nil {
					return err
				}
			case c == '&' || c == '*' || c == '!':
				if c == '*' {
					s.aliases++
					if s.l.Aliases > 0 && s.aliases > s.l.Aliases {
						return s.fail("aliases", s.l.Aliases)
					}
					if err := s.node(); err != nil {
						return err
					}
					tokenStart = false
				}
				for i+1 < len(line) && !isNameEnd(line[i+1]) {
					i++
				}
			case (c == '|' || c == '>') && flow == 0:
				if err := s.node(); err != nil {
					return err
				}
				blockBody = indent
				i = len(line)
			case c == '%' && i == 0:
				i = len(line) // a directive
			default:
				plain, tokenStart = true, false
				if err := s.node(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func isNameEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\r', ',', '[', ']', '{', '}':
		return true
	}
	return false
}

// expandedNodes parses b into a syntax tree (aliases stay references) and
// counts its nodes with every alias replaced by what its anchor names.
func expandedNodes(source string, b []byte, l Limits) error {
	f, err := parser.ParseBytes(b, 0)
	if err != nil {
		return nil // the decoder reports the syntax error
	}
	c := aliasCounter{anchors: map[string]int{}, max: l.Nodes}
	total := 0
	for _, d := range f.Docs {
		total = c.add(total, c.count(d))
	}
	if total > l.Nodes {
		line := 0
		if c.at != nil && c.at.GetToken() != nil && c.at.GetToken().Position != nil {
			line = c.at.GetToken().Position.Line
		}
		return &LimitError{Source: source, Line: line, What: "node count with aliases expanded", Limit: int64(l.Nodes)}
	}
	return nil
}

type aliasCounter struct {
	anchors map[string]int
	max     int
	at      ast.Node // the innermost node whose count first passed max
}

// sum counts a collection: itself and its members.
func sum[N ast.Node](c *aliasCounter, members []N) int {
	t := 1
	for _, v := range members {
		if t = c.add(t, c.count(v)); t > c.max && c.at == nil {
			c.at = v
		}
	}
	return t
}

// add saturates at max+1, so counts never overflow.
func (c *aliasCounter) add(a, b int) int {
	if a+b > c.max {
		return c.max + 1
	}
	return a + b
}

func (c *aliasCounter) count(n ast.Node) int {
	switch n := n.(type) {
	case nil:
		return 0
	case *ast.DocumentNode:
		return c.count(n.Body)
	case *ast.MappingNode:
		return sum(c, n.Values)
	case *ast.MappingValueNode:
		return c.add(c.count(n.Key), c.count(n.Value))
	case *ast.MappingKeyNode:
		return c.count(n.Value)
	case *ast.SequenceNode:
		return sum(c, n.Values)
	case *ast.TagNode:
		return c.count(n.Value)
	case *ast.AnchorNode:
		t := c.count(n.Value)
		if n.Name != nil {
			c.anchors[n.Name.String()] = t
		}
		return t
	case *ast.AliasNode:
		t := 1
		if n.Value != nil {
			if v, ok := c.anchors[n.Value.String()]; ok {
				t = v
			}
		}
		return t
	default:
		return 1
	}
}

// CheckJSON checks a JSON document against l (aliases do not exist in
// JSON). Every string, literal, array and object is a node.
func CheckJSON(source string, b []byte, l Limits) error {
	if l.Bytes > 0 && int64(len(b)) > l.Bytes {
		return &LimitError{Source: source, What: "size", Limit: l.Bytes}
	}
	line, depth, nodes := 1, 0, 0
	inString, literal := false, false
	fail := func(what string, limit int) error {
		return &LimitError{Source: source, Line: line, What: what, Limit: int64(limit)}
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\n' {
			line++
		}
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		isLiteral := c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		newNode := c == '"' || c == '[' || c == '{' || (isLiteral && !literal)
		literal = isLiteral
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if l.Depth > 0 && depth > l.Depth {
				return fail("nesting depth", l.Depth)
			}
		case ']', '}':
			depth--
		}
		if newNode {
			nodes++
			if l.Nodes > 0 && nodes > l.Nodes {
				return fail("node count", l.Nodes)
			}
		}
	}
	return nil
}
