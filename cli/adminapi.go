package cli

import (
	"encoding/json"
	"fmt"
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
func (a *app) adminCall(method, addr, path string, q url.Values) error {
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
	if _, err := io.Copy(a.stdout, resp.Body); err != nil {
		return fmt.Errorf("reading the admin API's answer to %s %s: %w", method, path, err)
	}
	return nil
}
