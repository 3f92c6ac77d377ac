package cli

import (
	"flag"
	"fmt"
	"strings"
)

// parseArgs parses flags that may come before or after the positional
// arguments (Go's flag package stops at the first positional one) and
// returns the positional arguments.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// setFlags collects repeated --set key=value flags.
type setFlags []string

func (s *setFlags) String() string     { return fmt.Sprint(*s) }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

// oneLine joins the lines of a multi-line error message (errors.Join).
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}
