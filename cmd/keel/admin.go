package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

var httpClient = &http.Client{Timeout: 30 * time.Second}

func adminCall(method, addr, path string, q url.Values) error {
	u := "http://" + addr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

func cmdAdmin(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: keel admin (status|promote|force-writes) [--admin ADDR]")
	}
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	addr := fs.String("admin", "127.0.0.1:10914", "admin API `address`")
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

func cmdQuery(args []string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	addr := fs.String("admin", "127.0.0.1:10914", "admin API `address`")
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
