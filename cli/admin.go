package cli

import (
	"flag"
	"fmt"

	"github.com/keelmq/keel/host/profile"
)

// admin is `keel admin (status|promote|force-writes)`: one call to a
// running node's admin API, whose answer it prints; and `keel admin
// (topic|group|consumer|cluster) ...`, which speak the remoting protocol
// (adminRemoting).
func (a *app) admin(args []string) error {
	const help = "usage: keel admin (status|promote|force-writes) [--admin ADDR]\n"
	if len(args) == 0 {
		return fmt.Errorf("%s%s", help, adminRemotingHelp)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprintf(a.stdout, "%s%s", help, adminRemotingHelp)
		return nil
	case "topic", "group", "consumer":
		return a.adminRemoting(args[0], args[1:])
	case "cluster":
		return a.adminCluster(args[1:]) // status, elect; the rest through adminRemoting
	}
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	addr := fs.String("admin", profile.DefaultAdminAddr, "admin API `address`")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "status":
		return a.adminCall("GET", *addr, "/status", nil)
	case "promote":
		return a.adminCall("POST", *addr, "/admin/promote", nil)
	case "force-writes":
		return a.adminCall("POST", *addr, "/admin/force-writes", nil)
	}
	return fmt.Errorf("unknown admin command %q (status, promote, force-writes)", args[0])
}
