package pareto

import (
	"errors"
	"fmt"
	"strings"
)

// Direction says whether larger or smaller values of an objective are better.
type Direction string

const (
	Maximize Direction = "max"
	Minimize Direction = "min"
)

// Valid reports whether d is Maximize or Minimize.
func (d Direction) Valid() bool { return d == Maximize || d == Minimize }

// sign maps a value of this direction to minimisation space.
func (d Direction) sign() float64 {
	if d == Maximize {
		return -1
	}
	return 1
}

// Better reports whether a is strictly better than b in direction d.
func (d Direction) Better(a, b float64) bool {
	if d == Maximize {
		return a > b
	}
	return a < b
}

// Objective is one named objective and its direction. Names are the metric
// names trial.Result.Objective understands (e.g. "output_throughput",
// "tpot_p99", "peak_vram_gib"); this package never interprets them.
type Objective struct {
	Name      string    `json:"name"`
	Direction Direction `json:"direction"`
}

func (o Objective) String() string { return o.Name + ":" + string(o.Direction) }

// Objectives is an ordered list of objectives; vectors follow its order.
type Objectives []Objective

// ErrObjectives reports an invalid objective list.
var ErrObjectives = errors.New("invalid objectives")

// Validate checks that the list is non-empty, names are unique and non-empty
// and directions valid.
func (o Objectives) Validate() error {
	if len(o) == 0 {
		return fmt.Errorf("%w: none given", ErrObjectives)
	}
	seen := make(map[string]bool, len(o))
	for i, x := range o {
		switch {
		case x.Name == "":
			return fmt.Errorf("%w: objective %d has no name", ErrObjectives, i+1)
		case !x.Direction.Valid():
			return fmt.Errorf("%w: objective %q: direction %q (want max or min)", ErrObjectives, x.Name, x.Direction)
		case seen[x.Name]:
			return fmt.Errorf("%w: objective %q listed twice", ErrObjectives, x.Name)
		}
		seen[x.Name] = true
	}
	return nil
}

// Directions returns the directions in order.
func (o Objectives) Directions() []Direction {
	d := make([]Direction, len(o))
	for i, x := range o {
		d[i] = x.Direction
	}
	return d
}

// Names returns the names in order.
func (o Objectives) Names() []string {
	n := make([]string, len(o))
	for i, x := range o {
		n[i] = x.Name
	}
	return n
}

// Index returns the position of the named objective, or -1.
func (o Objectives) Index(name string) int {
	for i, x := range o {
		if x.Name == name {
			return i
		}
	}
	return -1
}

// String renders "name:dir,name:dir", the form ParseObjectives reads.
func (o Objectives) String() string {
	parts := make([]string, len(o))
	for i, x := range o {
		parts[i] = x.String()
	}
	return strings.Join(parts, ",")
}

// Equal reports whether both lists hold the same objectives in the same order.
func (o Objectives) Equal(p Objectives) bool {
	if len(o) != len(p) {
		return false
	}
	for i := range o {
		if o[i] != p[i] {
			return false
		}
	}
	return true
}

// ParseObjectives reads "output_throughput:max,tpot_p99:min,peak_vram_gib:min".
// "maximize"/"maximise"/"minimize"/"minimise" are accepted as directions.
func ParseObjectives(s string) (Objectives, error) {
	var out Objectives
	for i, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		name, dir, ok := strings.Cut(term, ":")
		if !ok {
			return nil, fmt.Errorf("%w: term %d %q: want NAME:max or NAME:min", ErrObjectives, i+1, term)
		}
		d := Direction(strings.ToLower(strings.TrimSpace(dir)))
		switch d {
		case "maximize", "maximise":
			d = Maximize
		case "minimize", "minimise":
			d = Minimize
		}
		out = append(out, Objective{Name: strings.TrimSpace(name), Direction: d})
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}
