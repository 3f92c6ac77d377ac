package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"github.com/keelmq/keel/host/profile"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

var httpClient = &http.Client{Timeout: 30 * time.Second}

// adminCall calls the admin API and prints the answer's body on success.
// A POST carries an empty JSON object as application/json (the admin API
// refuses other content types on its mutating endpoints). An answer of 300
// or more is an error carrying the status and the API's {"error": ...}
// message (or the body as text), and prints nothing.
func adminCall(method, addr, path string, q url.Values) error {
	u := "http://" + addr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return fmt.Errorf("admin API request %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	if _, err := io.Copy(cliOut, resp.Body); err != nil {
		return fmt.Errorf("reading the admin API's answer to %s %s: %w", method, path, err)
	}
	return nil
}

func cmdAdmin(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: keel admin (status|promote|force-writes) [--admin ADDR]")
	}
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	addr := fs.String("admin", profile.DefaultAdminAddr, "admin API `address`")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "status":
		return adminCall("GET", *addr, "/status", nil)
	case "promote":
		return adminCall("POST", *addr, "/admin/promote", nil)
	case "force-writes":
		return adminCall("POST", *addr, "/admin/force-writes", nil)
	}
	return fmt.Errorf("unknown admin command %q (status, promote, force-writes)", args[0])
}

const queryHelp = `usage: keel query [--admin ADDR] (--topic T --key K | --id MSGID)

Looks messages up through a running node's admin API and prints them as
JSON.

Exit status:
  0  the lookup succeeded (a key query may find nothing)
  1  the lookup failed: no such message, a damaged record (the message
     names its offset and the damage), or the admin API is unreachable
`

func cmdQuery(args []string) error {
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
		return adminCall("GET", *addr, "/message", url.Values{"id": {*id}})
	}
	if *topic == "" || *key == "" {
		return fmt.Errorf("usage: keel query [--admin ADDR] (--topic T --key K | --id MSGID)")
	}
	return adminCall("GET", *addr, "/query", url.Values{"topic": {*topic}, "key": {*key},
		"max": {fmt.Sprint(*max)}, "begin": {fmt.Sprint(*begin)}, "end": {fmt.Sprint(*end)}})
}
