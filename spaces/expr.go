package spaces

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Expr is a compiled constraint or condition expression. The language is
// small on purpose: numbers, strings, true/false, identifiers (parameter names,
// model.*, gpu.*, engine.version), the operators ! * / % + - < <= > >= == != &&
// ||, parentheses and the functions min, max, contains, version_ge.
type Expr struct {
	src  string
	root node
}

// ParseExpr compiles src.
func ParseExpr(src string) (*Expr, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &exprParser{toks: toks}
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, fmt.Errorf("expression %q: unexpected %q at offset %d", src, p.peek().text, p.peek().pos)
	}
	return &Expr{src: src, root: n}, nil
}

func (e *Expr) String() string { return e.src }

// Idents lists the identifiers the expression reads.
func (e *Expr) Idents() []string {
	var out []string
	var walk func(node)
	walk = func(n node) {
		switch n := n.(type) {
		case identNode:
			out = append(out, string(n))
		case unaryNode:
			walk(n.x)
		case binaryNode:
			walk(n.l)
			walk(n.r)
		case callNode:
			for _, a := range n.args {
				walk(a)
			}
		}
	}
	walk(e.root)
	return out
}

// Env resolves identifiers during evaluation.
type Env func(name string) (Value, bool)

// EvalBool evaluates the expression and requires a boolean result.
func (e *Expr) EvalBool(env Env) (bool, error) {
	v, err := e.root.eval(env)
	if err != nil {
		return false, fmt.Errorf("expression %q: %w", e.src, err)
	}
	if v.kind != Bool {
		return false, fmt.Errorf("expression %q: result is %s, not bool", e.src, kindName(v))
	}
	return v.Bool(), nil
}

// Eval evaluates the expression to a value.
func (e *Expr) Eval(env Env) (Value, error) {
	v, err := e.root.eval(env)
	if err != nil {
		return Value{}, fmt.Errorf("expression %q: %w", e.src, err)
	}
	return v, nil
}

// --- lexer

type tokKind int

const (
	tEOF tokKind = iota
	tNum
	tStr
	tIdent
	tOp
)

type tok struct {
	kind tokKind
	text string
	pos  int
}

func lex(src string) ([]tok, error) {
	var out []tok
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' || src[j] == 'e' || src[j] == 'E' ||
				(src[j] == '-' || src[j] == '+') && j > i && (src[j-1] == 'e' || src[j-1] == 'E')) {
				j++
			}
			out = append(out, tok{tNum, src[i:j], i})
			i = j
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("expression %q: unterminated string at offset %d", src, i)
			}
			out = append(out, tok{tStr, src[i+1 : i+1+j], i})
			i += j + 2
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '.' || src[j] >= 'a' && src[j] <= 'z' ||
				src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, tok{tIdent, src[i:j], i})
			i = j
		default:
			two := ""
			if i+1 < len(src) {
				two = src[i : i+2]
			}
			switch two {
			case "&&", "||", "==", "!=", "<=", ">=":
				out = append(out, tok{tOp, two, i})
				i += 2
				continue
			}
			if strings.IndexByte("!*/%+-<>(),", c) < 0 {
				return nil, fmt.Errorf("expression %q: unexpected character %q at offset %d", src, c, i)
			}
			out = append(out, tok{tOp, string(c), i})
			i++
		}
	}
	return append(out, tok{tEOF, "end of expression", len(src)}), nil
}

// --- parser (precedence climbing)

type exprParser struct {
	toks  []tok
	i     int
	depth int
}

func (p *exprParser) peek() tok { return p.toks[p.i] }
func (p *exprParser) next() tok { t := p.toks[p.i]; p.i++; return t }

// maxExprDepth bounds the parser's recursion: a hostile "((((..." must be
// an error, not a stack overflow.
const maxExprDepth = 100

// nested parses one level of nesting (an expression, or the operand of a
// unary operator) with parse.
func (p *exprParser) nested(parse func() (node, error)) (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxExprDepth {
		return nil, fmt.Errorf("expression nested too deeply")
	}
	return parse()
}

var binPrec = map[string]int{
	"||": 1, "&&": 2,
	"==": 3, "!=": 3,
	"<": 4, "<=": 4, ">": 4, ">=": 4,
	"+": 5, "-": 5,
	"*": 6, "/": 6, "%": 6,
}

func (p *exprParser) expr(minPrec int) (node, error) {
	return p.nested(func() (node, error) { return p.binary(minPrec) })
}

// binary is an operand followed by operators binding tighter than minPrec
// (precedence climbing).
func (p *exprParser) binary(minPrec int) (node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		prec, ok := binPrec[t.text]
		if t.kind != tOp || !ok || prec <= minPrec {
			return l, nil
		}
		p.next()
		r, err := p.expr(prec)
		if err != nil {
			return nil, err
		}
		l = binaryNode{op: t.text, l: l, r: r}
	}
}

func (p *exprParser) unary() (node, error) {
	t := p.peek()
	if t.kind == tOp && (t.text == "!" || t.text == "-") {
		p.next()
		x, err := p.nested(p.unary)
		if err != nil {
			return nil, err
		}
		return unaryNode{op: t.text, x: x}, nil
	}
	return p.primary()
}

func (p *exprParser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tNum:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q at offset %d", t.text, t.pos)
		}
		return litNode{FloatValue(f)}, nil
	case tStr:
		return litNode{StringValue(t.text)}, nil
	case tIdent:
		switch t.text {
		case "true", "false":
			return litNode{BoolValue(t.text == "true")}, nil
		}
		if p.peek().text == "(" && p.peek().kind == tOp {
			p.next()
			var args []node
			for p.peek().text != ")" {
				a, err := p.expr(0)
				if err != nil {
					return nil, err
				}
				args = append(args, a)
				if p.peek().text == "," {
					p.next()
					continue
				}
				if p.peek().text != ")" {
					return nil, fmt.Errorf("expected , or ) at offset %d, found %q", p.peek().pos, p.peek().text)
				}
			}
			p.next()
			if err := checkCall(t.text, len(args)); err != nil {
				return nil, err
			}
			return callNode{fn: t.text, args: args}, nil
		}
		return identNode(t.text), nil
	case tOp:
		if t.text == "(" {
			n, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if c := p.next(); c.text != ")" {
				return nil, fmt.Errorf("expected ) at offset %d, found %q", c.pos, c.text)
			}
			return n, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.pos)
}

func checkCall(fn string, n int) error {
	want := map[string]int{"min": 2, "max": 2, "contains": 2, "version_ge": 1}
	w, ok := want[fn]
	if !ok {
		return fmt.Errorf("unknown function %s", fn)
	}
	if n != w {
		return fmt.Errorf("%s takes %d argument(s), got %d", fn, w, n)
	}
	return nil
}

// --- evaluation

type node interface{ eval(Env) (Value, error) }

type litNode struct{ v Value }
type identNode string
type unaryNode struct {
	op string
	x  node
}
type binaryNode struct {
	op   string
	l, r node
}
type callNode struct {
	fn   string
	args []node
}

func (n litNode) eval(Env) (Value, error) { return n.v, nil }

func (n identNode) eval(env Env) (Value, error) {
	if env != nil {
		if v, ok := env(string(n)); ok {
			return v, nil
		}
	}
	return Value{}, fmt.Errorf("unknown identifier %s", string(n))
}

func (n unaryNode) eval(env Env) (Value, error) {
	x, err := n.x.eval(env)
	if err != nil {
		return Value{}, err
	}
	if n.op == "!" {
		if x.kind != Bool {
			return Value{}, fmt.Errorf("! needs bool, got %s", kindName(x))
		}
		return BoolValue(!x.Bool()), nil
	}
	if !isNum(x) {
		return Value{}, fmt.Errorf("- needs a number, got %s", kindName(x))
	}
	return FloatValue(-x.num), nil
}

func (n binaryNode) eval(env Env) (Value, error) {
	l, err := n.l.eval(env)
	if err != nil {
		return Value{}, err
	}
	// && and || short-circuit so a guard can protect the right side.
	if n.op == "&&" || n.op == "||" {
		if l.kind != Bool {
			return Value{}, fmt.Errorf("%s needs bool operands, got %s", n.op, kindName(l))
		}
		if n.op == "&&" && !l.Bool() || n.op == "||" && l.Bool() {
			return l, nil
		}
		r, err := n.r.eval(env)
		if err != nil {
			return Value{}, err
		}
		if r.kind != Bool {
			return Value{}, fmt.Errorf("%s needs bool operands, got %s", n.op, kindName(r))
		}
		return r, nil
	}
	r, err := n.r.eval(env)
	if err != nil {
		return Value{}, err
	}
	switch n.op {
	case "==", "!=":
		var eq bool
		switch {
		case isNum(l) && isNum(r):
			eq = l.num == r.num
		case l.kind == Categorical && r.kind == Categorical:
			eq = l.str == r.str
		case l.kind == Bool && r.kind == Bool:
			eq = l.Bool() == r.Bool()
		default:
			return Value{}, fmt.Errorf("cannot compare %s with %s", kindName(l), kindName(r))
		}
		return BoolValue(eq == (n.op == "==")), nil
	}
	if !isNum(l) || !isNum(r) {
		return Value{}, fmt.Errorf("%s needs numbers, got %s and %s", n.op, kindName(l), kindName(r))
	}
	a, b := l.num, r.num
	switch n.op {
	case "<":
		return BoolValue(a < b), nil
	case "<=":
		return BoolValue(a <= b), nil
	case ">":
		return BoolValue(a > b), nil
	case ">=":
		return BoolValue(a >= b), nil
	case "+":
		return FloatValue(a + b), nil
	case "-":
		return FloatValue(a - b), nil
	case "*":
		return FloatValue(a * b), nil
	case "/":
		if b == 0 {
			return Value{}, fmt.Errorf("division by zero")
		}
		return FloatValue(a / b), nil
	case "%":
		if b == 0 {
			return Value{}, fmt.Errorf("modulo by zero")
		}
		return FloatValue(math.Mod(a, b)), nil
	}
	return Value{}, fmt.Errorf("unknown operator %s", n.op)
}

func (n callNode) eval(env Env) (Value, error) {
	args := make([]Value, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(env)
		if err != nil {
			return Value{}, err
		}
		args[i] = v
	}
	switch n.fn {
	case "min", "max":
		if !isNum(args[0]) || !isNum(args[1]) {
			return Value{}, fmt.Errorf("%s needs numbers", n.fn)
		}
		if n.fn == "min" {
			return FloatValue(math.Min(args[0].num, args[1].num)), nil
		}
		return FloatValue(math.Max(args[0].num, args[1].num)), nil
	case "contains":
		if args[0].kind != Categorical || args[1].kind != Categorical {
			return Value{}, fmt.Errorf("contains needs strings")
		}
		return BoolValue(strings.Contains(strings.ToLower(args[0].str), strings.ToLower(args[1].str))), nil
	case "version_ge":
		ver, ok := env("engine.version")
		if !ok || ver.kind != Categorical || args[0].kind != Categorical {
			return Value{}, fmt.Errorf("version_ge needs engine.version and a version string")
		}
		c, err := CompareVersions(ver.str, args[0].str)
		if err != nil {
			return Value{}, err
		}
		return BoolValue(c >= 0), nil
	}
	return Value{}, fmt.Errorf("unknown function %s", n.fn)
}

func isNum(v Value) bool { return v.kind == Int || v.kind == Float }

func kindName(v Value) string {
	switch v.kind {
	case Int, Float:
		return "number"
	case Bool:
		return "bool"
	case Categorical:
		return "string"
	}
	return "nothing"
}
