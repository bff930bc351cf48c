package gate

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteText writes the report as a table for people.
func WriteText(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "CELL\tMETRIC\tBASE\tNEW\tEFFECT\tMDE\tP\tP (ADJ)\tVERDICT\n")
	for _, row := range r.Rows {
		v := string(row.Verdict)
		if row.Verdict == Untestable {
			v += ": " + row.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Cell, row.Metric.Name,
			value(row.Base, row.Metric.Unit), value(row.New, row.Metric.Unit), effect(row.Effect),
			mde(row.MDE), pval(row.P), pval(row.AdjustedP), v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped cell %s: %s\n", s.Cell, s.Reason)
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", r.headline(), r.rule())
	return err
}

// WriteJSON writes the report as indented JSON (NaN as null).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report as a pull-request comment: the verdict
// first, the rows that changed, then every row folded away.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	status := "No regression"
	switch {
	case r.Regressed():
		status = "Regression"
	case r.Undecided():
		status = "Inconclusive"
	}
	fmt.Fprintf(&b, "### Benchmark comparison: %s — %s vs %s\n\n", status, code(r.New), code(r.Base))
	fmt.Fprintf(&b, "%s. %s.\n\n", capitalize(r.headline()), capitalize(r.rule()))
	if r.Undecided() {
		fmt.Fprintf(&b, "Inconclusive: no regression found, but for %d comparison%s the runs are too noisy to find one of the threshold's size "+
			"(minimum detectable effect above the threshold); rerun with longer runs, or raise the threshold of those metrics.\n\n",
			r.Inconclusive, plural(r.Inconclusive))
	}
	var changed []Row
	for _, row := range r.Rows {
		if row.Verdict == Regression || row.Verdict == Improvement || row.Verdict == Inconclusive {
			changed = append(changed, row)
		}
	}
	if len(changed) > 0 {
		mdTable(&b, changed)
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "<details><summary>All %d comparisons</summary>\n\n", len(r.Rows))
	mdTable(&b, r.Rows)
	b.WriteString("\n</details>\n")
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "\nSkipped cell %s: %s.\n", code(s.Cell), s.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdTable(b *strings.Builder, rows []Row) {
	b.WriteString("| Cell | Metric | Base | New | Effect | MDE | p (adj.) | Verdict |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, row := range rows {
		v := string(row.Verdict)
		switch row.Verdict {
		case Regression:
			v = "**regression**"
		case Inconclusive:
			v = "Inconclusive"
		case Untestable:
			v += ": " + row.Reason
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(row.Cell), row.Metric.Name,
			value(row.Base, row.Metric.Unit), value(row.New, row.Metric.Unit), effect(row.Effect),
			mde(row.MDE), pval(row.AdjustedP), mdEscape(v))
	}
}

// JUnit XML: one test suite per comparison, one test case per cell x
// metric; a regression is a failure, an untestable comparison is skipped,
// and so is an inconclusive one, with type "inconclusive".
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML for CI test reporters.
func WriteJUnit(w io.Writer, r *Report) error {
	suite := junitSuite{Name: fmt.Sprintf("bench compare %s vs %s", r.New, r.Base), Tests: len(r.Rows),
		Failures: r.Regressions, Skipped: r.Untestable + r.Inconclusive}
	for _, row := range r.Rows {
		detail := fmt.Sprintf("base %s, new %s, effect %s, minimum detectable effect %s, p %s, adjusted p %s, threshold %s, test %s",
			value(row.Base, row.Metric.Unit), value(row.New, row.Metric.Unit), effect(row.Effect), mde(row.MDE),
			pval(row.P), pval(row.AdjustedP), share(row.Threshold), cmp.Or(row.Test, "-"))
		c := junitCase{Classname: row.Cell, Name: row.Metric.Name, Time: "0", SystemOut: string(row.Verdict) + ": " + detail}
		switch row.Verdict {
		case Regression:
			c.Failure = &junitMessage{Type: "regression", Text: detail,
				Message: fmt.Sprintf("%s %s in %s (p adj. %s)", row.Metric.Name, effect(row.Effect), row.Cell, pval(row.AdjustedP))}
		case Inconclusive:
			c.Skipped = &junitMessage{Type: "inconclusive", Message: row.Reason, Text: detail}
		case Untestable:
			c.Skipped = &junitMessage{Message: row.Reason}
		}
		suite.Cases = append(suite.Cases, c)
	}
	doc := junitSuites{Name: "tuner bench compare", Tests: suite.Tests, Failures: suite.Failures,
		Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func (r *Report) headline() string {
	return fmt.Sprintf("%d regression%s, %d improvement%s, %d unchanged, %d inconclusive, %d untestable",
		r.Regressions, plural(r.Regressions), r.Improvements, plural(r.Improvements), r.Unchanged, r.Inconclusive, r.Untestable)
}

func (r *Report) rule() string {
	corr := fmt.Sprintf("Holm over %d tests", r.Tests)
	if r.Correction == NoCorrection {
		corr = "no correction"
	}
	return fmt.Sprintf("alpha %g (%s), threshold %s, minimum detectable effect at %g%% power", r.Alpha, corr, share(r.Threshold), 100*Power)
}

// mde formats a minimum detectable effect: 0.031 as "3.1%".
func mde(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// value formats a metric value with about four significant digits.
func value(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	var s string
	switch a := math.Abs(v); {
	case a >= 100:
		s = fmt.Sprintf("%.0f", v)
	case a >= 10:
		s = fmt.Sprintf("%.1f", v)
	case a >= 1:
		s = fmt.Sprintf("%.2f", v)
	default:
		s = fmt.Sprintf("%.3g", v)
	}
	return s + " " + unit
}

func effect(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

// share formats a threshold: 0.05 as "5%".
func share(v float64) string { return fmt.Sprintf("%g%%", 100*v) }

func pval(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	if p < 1e-4 {
		return fmt.Sprintf("%.1e", p)
	}
	return fmt.Sprintf("%.4f", p)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func code(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
