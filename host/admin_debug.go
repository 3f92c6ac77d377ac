package host

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

	"github.com/keelmq/keel/host/profile"
)

// routeDebug adds Go's profiling endpoints under /debug/pprof/, with the
// command line's secrets redacted (redactArgs).
func routeDebug(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
		// pprof.Cmdline with the values of secret --set keys redacted.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// redactArgs returns args with the value of every --set KEY=VALUE whose
// key holds a secret (profile.IsSecretKey) replaced by profile.Redacted.
func redactArgs(args []string) []string {
	out := append([]string(nil), args...)
	redact := func(kv string) string {
		k, _, ok := strings.Cut(kv, "=")
		if ok && profile.IsSecretKey(strings.TrimSpace(k)) {
			return k + "=" + profile.Redacted
		}
		return kv
	}
	for i := 0; i < len(out); i++ {
		a := out[i]
		switch {
		case (a == "--set" || a == "-set") && i+1 < len(out):
			out[i+1] = redact(out[i+1])
			i++
		case strings.HasPrefix(a, "--set="):
			out[i] = "--set=" + redact(a[len("--set="):])
		case strings.HasPrefix(a, "-set="):
			out[i] = "-set=" + redact(a[len("-set="):])
		}
	}
	return out
}
