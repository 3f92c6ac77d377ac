package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
)

// profileCheck is `keel profile check`: it loads the profile, has every
// plugin it selects (from the app's catalog, or external) validate its
// configuration without opening the store, and prints the effective
// profile, its warnings and its durability table, headed by the plugins
// the table describes.
func (a *app) profileCheck(args []string) error {
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
	rows, err := host.Check(context.Background(), p, a.catalog)
	if err != nil {
		return err
	}
	eff, err := p.EffectiveRedacted()
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "# %s: valid\n# effective profile (defaults filled in):\n\n%s\n", pos[0], eff)
	for _, w := range p.Warnings {
		fmt.Fprintf(a.stdout, "# warning: %s\n", w)
	}
	if !p.HasRole(profile.RoleBroker) {
		fmt.Fprintf(a.stdout, "# no durability table: this process stores no messages (server.roles = %v)\n", p.Server.Roles)
		return nil
	}
	fmt.Fprintf(a.stdout, "# durability (flush: %s; replication: %s; index: %s)\n",
		pluginLabel(p.Flush.Plugin, p.Flush.Path), pluginLabel(p.Replication.Plugin, p.Replication.Path), pluginLabel(p.Index.Plugin, p.Index.Path))
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "#   %s:\t%s\n", r.Question, r.Answer)
	}
	return tw.Flush()
}

// pluginLabel names a section's plugin for the durability heading: its
// builtin or compiled-in name, or its external binary's path, or "none".
func pluginLabel(plugin, path string) string {
	if !profile.Chosen(plugin, path) {
		return profile.PluginNone
	}
	return profile.PluginName(plugin, path)
}
