package profile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/keelmq/keel/sdk/config"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Load reads the profile at path, applies overrides and validates the result.
//
// Each override is "key=value" with a dotted key, as given to `keel serve
// --set`: "store.segment_size=64MiB", "flush.config.interval=1s". The value
// is read as a TOML value if it is one (8, true, 0.5, "quoted", [1, 2],
// {a = 1}) and as a string otherwise (64MiB, 127.0.0.1:10911). Overrides are
// applied in order after the file, so a later one wins; an override of a
// plugin's config key reaches the plugin through DecodePluginConfig. The
// schema cannot be overridden.
//
// On success every field holds its effective value. On failure the error is
// an *Error, or an ErrorList when there are several problems of one kind
// (unknown keys, validation failures), and no Profile is returned. An error
// reading the file is returned wrapped, not as an *Error.
func Load(path string, overrides []string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading profile: %w", err)
	}
	return LoadBytes(path, data, overrides)
}

// LoadBytes is Load for a profile already in memory. name stands for the
// file: errors start with it, the profile's Name is its base name without
// extension, and relative plugin paths resolve against its directory.
func LoadBytes(name string, data []byte, overrides []string) (*Profile, error) {
	if name == "" {
		name = "profile"
	}
	data = bytes.Clone(data) // decoders keep subslices; never alias the caller's buffer
	base := filepath.Base(name)
	pname := strings.TrimSuffix(base, filepath.Ext(base))
	if pname == "" || pname == "." || pname == string(filepath.Separator) {
		pname = "profile"
	}
	p := &Profile{Name: pname, File: name, Dir: filepath.Dir(name)}

	src, err := config.NewSource(name, data, "")
	if err != nil {
		return nil, err
	}
	p.src, p.data = src, data
	if err := checkSchema(src); err != nil {
		return nil, err
	}
	for _, arg := range overrides {
		ov, err := parseOverride(name, arg)
		if err != nil {
			return nil, err
		}
		p.overlays = append(p.overlays, ov)
	}

	doc := defaults(pname)
	fresh := func() any { d := defaults(pname); return &d }
	if errs := src.Decode(&doc, fresh); errs != nil {
		return nil, errs.Err()
	}
	for _, ov := range p.overlays {
		if errs := ov.src.Decode(&doc, fresh); errs != nil {
			for _, e := range errs {
				if strings.HasPrefix(e.Msg, "want a string") {
					e.Msg += " (quote the value to pass a string)"
				}
			}
			return nil, errs.Err()
		}
	}

	p.Schema = doc.Schema
	p.Store, p.Flush, p.Replication, p.Index = doc.Store, doc.Flush, doc.Replication, doc.Index
	p.Server, p.Controller, p.Admin, p.ACL = doc.Server, doc.Controller, doc.Admin, doc.ACL
	p.normalize()
	if errs := p.validate(); len(errs) > 0 {
		return nil, errs.Err()
	}
	return p, nil
}

// checkSchema requires `schema = SchemaVersion` at top level.
func checkSchema(src *config.Source) error {
	v, ok := src.Lookup([]string{"schema"})
	if !ok {
		return &Error{File: src.File(), Key: "schema", Msg: fmt.Sprintf("missing schema version: add `schema = %d` at the top of the profile", SchemaVersion)}
	}
	at := func(msg string) error {
		return &Error{File: src.File(), Line: v.Line, Col: v.Col, Key: "schema", Msg: msg}
	}
	if v.Kind != "integer" {
		return at(fmt.Sprintf("want the integer %d, got %s", SchemaVersion, v.Describe()))
	}
	if n, err := strconv.ParseInt(v.Text, 0, 64); err != nil || n != SchemaVersion {
		return at(fmt.Sprintf("unsupported schema version %s: this keel reads schema = %d", v.Text, SchemaVersion))
	}
	return nil
}

// parseOverride turns "key=value" into a one-line TOML document.
func parseOverride(file, arg string) (*overlay, error) {
	fail := func(key, msg string) error {
		return &Error{File: file, Override: arg, Key: key, Msg: msg}
	}
	k, v, ok := strings.Cut(arg, "=")
	if !ok {
		return nil, fail("", "want key=value, e.g. store.segment_size=64MiB")
	}
	path, err := config.ParseKey(strings.TrimSpace(k))
	if err != nil {
		return nil, fail("", fmt.Sprintf("invalid key %q: want a dotted key such as store.segment_size", strings.TrimSpace(k)))
	}
	key := config.FormatKey(path)
	if path[0] == "schema" {
		return nil, fail(key, "the schema version cannot be overridden")
	}
	v = strings.TrimSpace(v)
	line := []byte(key + " = " + v + "\n")
	if !singleKeyValue(line) {
		line = []byte(key + " = " + config.Quote(v) + "\n")
	}
	src, err := config.NewSource(file, line, arg)
	if err != nil {
		return nil, err
	}
	return &overlay{src: src, doc: line, path: path}, nil
}

// singleKeyValue reports whether doc is exactly one valid key-value.
func singleKeyValue(doc []byte) bool {
	var p unstable.Parser
	p.Reset(doc)
	if !p.NextExpression() || p.Expression().Kind != unstable.KeyValue {
		return false
	}
	return !p.NextExpression() && p.Error() == nil
}

// present reports whether the file or an override sets path (or a key below
// or above it).
func (p *Profile) present(path []string) bool {
	if p.src.Has(path) {
		return true
	}
	for _, ov := range p.overlays {
		if hasPrefix(path, ov.path) || hasPrefix(ov.path, path) {
			return true
		}
	}
	return false
}

// normalize applies the defaults that depend on other keys.
func (p *Profile) normalize() {
	clear := func(section string, plugin *string, path string) {
		if path != "" && !p.present([]string{section, "plugin"}) {
			*plugin = ""
		}
	}
	clear(SectionFlush, &p.Flush.Plugin, p.Flush.Path)
	clear(SectionIndex, &p.Index.Plugin, p.Index.Path)
	clear(SectionReplication, &p.Replication.Plugin, p.Replication.Path)
	for _, m := range []*map[string]any{&p.Flush.Config, &p.Index.Config, &p.Replication.Config} {
		if len(*m) == 0 {
			*m = nil
		}
	}
	if p.Replication.Role == RoleSlave && !p.present([]string{"server", "broker_id"}) {
		p.Server.BrokerID = 1
	}
	if !p.present([]string{"server", "request_buffer_budget"}) && p.Server.RequestBufferBudget < p.Server.MaxFrameSize {
		p.Server.RequestBufferBudget = p.Server.MaxFrameSize
	}
	c := &p.Controller
	if c.Dir == "" {
		c.Dir = filepath.Join(p.Store.Dir, "controller")
	}
	if len(c.Peers) == 0 {
		c.Peers = []string{c.NodeID + "=" + c.RaftAddr}
	}
}
