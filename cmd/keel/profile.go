package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/keelmq/keel/internal/builtins"
	"os"
	"text/tabwriter"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
)

func cmdProfileCheck(args []string) error {
	fs := flag.NewFlagSet("profile check", flag.ContinueOnError)
	var sets setFlags
	fs.Var(&sets, "set", "override a profile key: `key=value` (repeatable)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: keel profile check FILE [--set key=value ...]")
	}
	p, err := profile.Load(pos[0], sets)
	if err != nil {
		return err
	}
	rows, err := host.Check(context.Background(), p, builtins.Catalog())
	if err != nil {
		return err
	}
	eff, err := p.EffectiveRedacted()
	if err != nil {
		return err
	}
	fmt.Printf("# %s: valid\n# effective profile (defaults filled in):\n\n%s\n", pos[0], eff)
	for _, w := range p.Warnings {
		fmt.Printf("# warning: %s\n", w)
	}
	fmt.Println("# durability")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "#   %s:\t%s\n", r.Question, r.Answer)
	}
	return tw.Flush()
}
