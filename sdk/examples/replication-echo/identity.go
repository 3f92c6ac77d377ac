package echo

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/vfs"
)

// idFile is the file in a slave's sdk.Config.DataDir that holds its
// identity, the id its hellos carry.
const idFile = "echo-slave-id"

// loadOrCreateID returns the slave identity kept in dir/echo-slave-id,
// creating the file with a fresh random id (32 hex digits) when it does
// not exist: the first start of a slave on a store gives that store its
// id, and every later start and reconnect uses the same one. The file is
// written with meta.WriteFileAtomic, so a crash leaves either no id or the
// complete one.
//
// dir must exist (sdk.Config.DataDir does). A file that holds no valid id
// (validID) is an error naming it, never silently replaced: replacing it
// would make the master count this store as a second slave until the old
// connection closed. A copy of the store directory copies the id too; the
// two slaves then replace each other's connection on the master (it logs
// each replacement), so give a cloned store a new id by deleting the file.
func loadOrCreateID(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("echo slave: no data directory (sdk.Config.DataDir) to keep its identity in")
	}
	path := filepath.Join(dir, idFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if err := validID(id); err != nil {
			return "", fmt.Errorf("echo slave: identity file %s: %w (delete it to give this store a new id)", path, err)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("echo slave: read identity: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("echo slave: new identity: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := meta.WriteFileAtomic(vfs.OS, path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("echo slave: write identity: %w", err)
	}
	return id, nil
}
