package cli

import (
	"flag"
	"fmt"
	"net/url"

	"github.com/keelmq/keel/host/profile"
)

const queryHelp = `usage: keel query [--admin ADDR] (--topic T --key K | --id MSGID)

Looks messages up through a running node's admin API and prints them as
JSON.

Exit status:
  0  the lookup succeeded (a key query may find nothing)
  1  the lookup failed: no such message, a damaged record (the message
     names its offset and the damage), or the admin API is unreachable
`

// query is `keel query` (queryHelp).
func (a *app) query(args []string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), queryHelp)
		fs.PrintDefaults()
	}
	addr := fs.String("admin", profile.DefaultAdminAddr, "admin API `address`")
	topic := fs.String("topic", "", "topic")
	key := fs.String("key", "", "message key (KEYS or UNIQ_KEY)")
	id := fs.String("id", "", "offset message id")
	max := fs.Int("max", 32, "at most `N` messages")
	begin := fs.Int64("begin", 0, "stored at or after (Unix ms)")
	end := fs.Int64("end", 0, "stored at or before (Unix ms)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id != "" {
		return a.adminCall("GET", *addr, "/message", url.Values{"id": {*id}})
	}
	if *topic == "" || *key == "" {
		return fmt.Errorf("usage: keel query [--admin ADDR] (--topic T --key K | --id MSGID)")
	}
	return a.adminCall("GET", *addr, "/query", url.Values{"topic": {*topic}, "key": {*key},
		"max": {fmt.Sprint(*max)}, "begin": {fmt.Sprint(*begin)}, "end": {fmt.Sprint(*end)}})
}
