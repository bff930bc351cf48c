package surrogate

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Export formats.
const (
	FormatCSV    = "csv"
	FormatLibSVM = "libsvm"
)

// ExportOptions select the format of ExportData.
type ExportOptions struct {
	Format string // "csv" or "libsvm"
	// Label is the libsvm label: an objective name or "feasible". CSV
	// carries every label as a column and ignores it.
	Label string
}

// ExportData writes the training matrix. CSV: a header of the schema's
// feature names, then one "y.NAME" column per objective (the model target:
// log(metric / baseline) for log objectives) and "feasible" (1/0); a
// missing value is an empty cell. libsvm: rows with the chosen label, every
// feature written (0-based indices, zeros included, so that XGBoost does
// not read a zero as missing). Write the schema (WithTargets) next to it.
func ExportData(w io.Writer, m *Matrix, opts ExportOptions) error {
	bw := bufio.NewWriter(w)
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	switch opts.Format {
	case FormatCSV, "":
		for i, f := range m.Schema.Features {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString(f.Name)
		}
		for _, o := range m.Objectives {
			bw.WriteString(",y." + o.Name)
		}
		bw.WriteString("," + FeasibilityName + "\n")
		for i, row := range m.X {
			for j, v := range row {
				if j > 0 {
					bw.WriteByte(',')
				}
				bw.WriteString(num(v))
			}
			for k := range m.Objectives {
				bw.WriteString("," + num(m.Y[k][i]))
			}
			bw.WriteString("," + num(m.Feasible[i]) + "\n")
		}
	case FormatLibSVM:
		var y []float64
		if opts.Label == FeasibilityName {
			y = m.Feasible
		} else {
			for k, o := range m.Objectives {
				if o.Name == opts.Label {
					y = m.Y[k]
				}
			}
		}
		if y == nil {
			return fmt.Errorf("export: libsvm label %q is not %q or an objective", opts.Label, FeasibilityName)
		}
		for i, row := range m.X {
			if math.IsNaN(y[i]) {
				continue
			}
			bw.WriteString(num(y[i]))
			for j, v := range row {
				if math.IsNaN(v) {
					continue
				}
				fmt.Fprintf(bw, " %d:%s", j, num(v))
			}
			bw.WriteByte('\n')
		}
	default:
		return fmt.Errorf("export: unknown format %q (csv or libsvm)", opts.Format)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// WithTargets returns the schema file that accompanies an export of m: the
// features plus the objectives as targets.
func (m *Matrix) WithTargets() *Schema {
	s := m.Schema.withoutTargets()
	s.Targets = append([]Objective(nil), m.Objectives...)
	return s
}
