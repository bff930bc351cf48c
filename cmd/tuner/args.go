package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// normalizeArgs reorders a command line the way users of Go and Python
// tools write it into the order urfave/cli parses: global flags (--db,
// --verbose) written after the command move before it, and a command's
// flags written after its arguments move before them, each with its value
// when it takes one. Nothing after "--" moves. A flag no command on the
// path defines stays where it is (the parser names it).
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	var globals, path, flags, positional []string
	cmds := app.Commands
	var leaf *cli.Command
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if isFlagArg(a) {
			if f, ok := findFlag(leafFlags(leaf), a); ok {
				flags = append(flags, takeFlag(args, &i, f)...)
				continue
			}
			if f, ok := findFlag(app.Flags, a); ok {
				globals = append(globals, takeFlag(args, &i, f)...)
				continue
			}
			if leaf == nil {
				globals = append(globals, a) // unknown before any command: the parser says so
			} else {
				flags = append(flags, a)
			}
			continue
		}
		if len(positional) == 0 {
			if c := findCommand(cmds, a); c != nil {
				// a parent's flags stay with the parent
				path = append(append(path, flags...), a)
				leaf, cmds, flags = c, c.Subcommands, nil
				continue
			}
		}
		positional = append(positional, a)
	}
	out := append([]string{args[0]}, globals...)
	out = append(out, path...)
	out = append(out, flags...)
	out = append(out, positional...)
	return append(out, args[i:]...)
}

func leafFlags(c *cli.Command) []cli.Flag {
	if c == nil {
		return nil
	}
	return append(c.Flags, cli.HelpFlag)
}

// isFlagArg reports whether a is a flag ("-" alone is an argument: stdin).
func isFlagArg(a string) bool { return len(a) > 1 && a[0] == '-' }

// findFlag finds the flag a (-x, --name or --name=value) names in fs.
func findFlag(fs []cli.Flag, a string) (cli.Flag, bool) {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	for _, f := range fs {
		for _, n := range f.Names() {
			if n == name {
				return f, true
			}
		}
	}
	return nil, false
}

// takeFlag returns the flag at args[*i] and, when it takes a value given as
// the next word, that word too (advancing *i).
func takeFlag(args []string, i *int, f cli.Flag) []string {
	a := args[*i]
	if strings.Contains(a, "=") || *i+1 >= len(args) {
		return []string{a}
	}
	if v, ok := f.(cli.DocGenerationFlag); !ok || !v.TakesValue() {
		return []string{a}
	}
	*i++
	return []string{a, args[*i]}
}

func findCommand(cs []*cli.Command, name string) *cli.Command {
	for _, c := range cs {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// checkArgs makes every command that declares no arguments (an empty
// ArgsUsage) refuse them with one message naming the full command.
func checkArgs(cmd *cli.Command) {
	for _, sub := range cmd.Subcommands {
		checkArgs(sub)
	}
	action := cmd.Action
	if action == nil || strings.TrimSpace(cmd.ArgsUsage) != "" {
		return
	}
	cmd.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			hint := ""
			if h := noArgsHint[cmd.Name]; h != "" {
				hint = " (" + h + ")"
			}
			return usagef("tuner %s takes no arguments, got %q%s", fullName(c), c.Args().First(), hint)
		}
		return action(c)
	}
}

// noArgsHint says where what a user may have meant as an argument goes.
var noArgsHint = map[string]string{
	"check":   "the database comes from --db or TUNER_DB",
	"migrate": "the database comes from --db or TUNER_DB",
	"copy":    "the databases come from --from and --to",
	"trials":  "use --study ID",
}

// fullName is a command's name with its parents' ("bench export").
func fullName(c *cli.Context) string {
	var names []string
	for _, x := range c.Lineage() {
		if x.Command != nil && x.Command.Name != "" {
			names = append([]string{x.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}
