package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
)

func init() { register(scheduleCommand()) }

// scheduleCommand is a thin door over a running service's schedules API:
// the service fires them, so they are edited where it reads them.
func scheduleCommand() *cli.Command {
	common := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: "server", Value: "http://127.0.0.1:8080", EnvVars: []string{"TUNER_SERVER"}, Usage: "`URL` of the running tuner serve"},
			&cli.StringFlag{Name: "token", EnvVars: []string{"TUNER_TOKEN"}, Usage: "the server's bearer `TOKEN`"},
		}, extra...)
	}
	byID := func(name, usage string, patch string) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, ArgsUsage: "ID", Flags: common(), Action: func(c *cli.Context) error {
			id, err := oneScheduleID(c)
			if err != nil {
				return err
			}
			method, body := http.MethodPatch, patch
			if patch == "" {
				method = http.MethodDelete
			}
			if _, err := scheduleAPI(c, method, "/"+url.PathEscape(id), body); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "schedule %s: %s\n", id, name)
			return nil
		}}
	}
	return &cli.Command{
		Name:  "schedule",
		Usage: "list, add, pause, resume or remove the schedules of a running `tuner serve`",
		Description: "The service fires the schedules (cron expressions queueing benchmark tiers and searches); these\n" +
			"commands call its API (/api/v1/schedules), so the same checks and messages apply.",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "the schedules with their next run and last result", ArgsUsage: " ",
				Flags: common(&cli.BoolFlag{Name: "json", Usage: "the API's JSON"}), Action: scheduleList},
			{Name: "add", Usage: "add a schedule that queues JOB (the JSON body of a job, as POST /api/v1/jobs takes it)", ArgsUsage: "JOB",
				Flags: common(
					&cli.StringFlag{Name: "name", Required: true, Usage: "unique `NAME`"},
					&cli.StringFlag{Name: "cron", Required: true, Usage: "`EXPR`: five fields (\"0 2 * * *\") or @hourly, @daily, @nightly, @weekly, @every 6h"},
					&cli.BoolFlag{Name: "no-catch-up", Usage: "record a run missed while the service was down instead of running it once at the next start"},
					&cli.BoolFlag{Name: "paused", Usage: "add it paused"},
				), Action: scheduleAdd},
			byID("pause", "pause a schedule", `{"paused":true}`),
			byID("resume", "resume a schedule (it fires at its next slot from now)", `{"paused":false}`),
			byID("rm", "remove a schedule (its jobs and runs stay)", ""),
		},
	}
}

func oneScheduleID(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usagef("tuner schedule %s takes one schedule ID (sched-N; see tuner schedule list)", c.Command.Name)
	}
	return c.Args().First(), nil
}

// scheduleAPI calls the schedules API and returns the answer's body; a
// 400 is a usage error with the server's message.
func scheduleAPI(c *cli.Context, method, path, body string) ([]byte, error) {
	base := strings.TrimRight(c.String("server"), "/")
	req, err := http.NewRequestWithContext(c.Context, method, base+"/api/v1/schedules"+path, strings.NewReader(body))
	if err != nil {
		return nil, usagef("--server %q: %v", c.String("server"), err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := c.String("token"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("tuner serve at %s: %w", base, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("tuner serve at %s: %w", base, err)
	}
	if resp.StatusCode < 300 {
		return out, nil
	}
	var ae struct{ Message string }
	if json.Unmarshal(out, &ae) != nil || ae.Message == "" {
		ae.Message = strings.TrimSpace(string(out))
	}
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusConflict {
		return nil, usagef("%s", ae.Message)
	}
	return nil, fmt.Errorf("tuner serve at %s: %s %s: %s", base, method, resp.Status, ae.Message)
}

func scheduleAdd(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("tuner schedule add takes one JOB (a JSON object, e.g. '{\"kind\":\"bench\",\"tier\":\"nightly\",...}')")
	}
	job := json.RawMessage(c.Args().First())
	if !json.Valid(job) {
		return usagef("JOB: not JSON: %.80s", c.Args().First())
	}
	body, _ := json.Marshal(map[string]any{"name": c.String("name"), "cron": c.String("cron"),
		"catch_up": !c.Bool("no-catch-up"), "paused": c.Bool("paused"), "job": job})
	out, err := scheduleAPI(c, http.MethodPost, "", string(body))
	if err != nil {
		return err
	}
	var sc scheduleRow
	if err := json.Unmarshal(out, &sc); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "schedule %s (%s) added: next run %s\n", sc.ID, sc.Name, nextText(sc))
	return nil
}

// scheduleRow is what list shows of the API's schedule.
type scheduleRow struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Cron     string    `json:"cron"`
	Paused   bool      `json:"paused"`
	Kind     string    `json:"kind"`
	Tier     string    `json:"tier"`
	Model    string    `json:"model"`
	NextFire time.Time `json:"next_fire"`
	Last     *struct {
		Job   string `json:"job"`
		State string `json:"state"`
		Gates []struct {
			Verdict string `json:"verdict"`
		} `json:"gates"`
	} `json:"last_result"`
}

func nextText(sc scheduleRow) string {
	if sc.Paused {
		return "paused"
	}
	if sc.NextFire.IsZero() {
		return "-"
	}
	return sc.NextFire.Local().Format("2006-01-02 15:04 MST")
}

func scheduleList(c *cli.Context) error {
	out, err := scheduleAPI(c, http.MethodGet, "", "")
	if err != nil {
		return err
	}
	if c.Bool("json") {
		var buf bytes.Buffer
		if err := json.Indent(&buf, out, "", "  "); err != nil {
			return err
		}
		_, err = buf.WriteTo(c.App.Writer)
		return err
	}
	var rows []scheduleRow
	if err := json.Unmarshal(out, &rows); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCRON\tRUNS\tNEXT\tLAST")
	for _, sc := range rows {
		what := sc.Kind
		if sc.Tier != "" {
			what = sc.Tier + " " + what
		}
		last := "-"
		if sc.Last != nil {
			last = sc.Last.Job + " " + sc.Last.State
			for _, g := range sc.Last.Gates {
				last += " " + g.Verdict
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s of %s\t%s\t%s\n", sc.ID, sc.Name, sc.Cron, what, cmp.Or(sc.Model, "-"), nextText(sc), last)
	}
	return tw.Flush()
}
