package replication

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// ErrAuth: the peer failed authentication (wrong secret, a replayed proof,
// or a peer that does not speak the protocol). The connection is closed.
var ErrAuth = errors.New("HA authentication failed")

// Labels bind a proof to its direction, so a proof one side computes can
// never be replayed as the other side's.
const (
	labelMaster = "keel-ha-v1 master"
	labelSlave  = "keel-ha-v1 slave"
)

// NewNonce returns NonceSize random bytes from crypto/rand.
func NewNonce() ([NonceSize]byte, error) {
	var n [NonceSize]byte
	if _, err := rand.Read(n[:]); err != nil {
		return n, fmt.Errorf("HA nonce: %w", err)
	}
	return n, nil
}

// Proof is HMAC-SHA256 keyed with secret over label, then the nonce of the
// side being challenged by the proof's receiver (its own), then the other
// nonce. Each side proves knowledge of the secret over the other side's
// fresh nonce, so a recorded session is useless later.
func Proof(secret, label string, theirs, mine [NonceSize]byte) [NonceSize]byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(label))
	m.Write(theirs[:])
	m.Write(mine[:])
	var out [NonceSize]byte
	copy(out[:], m.Sum(nil))
	return out
}

// ClientAuth runs the slave (connecting) side of the mutual challenge:
//
//	slave  → CLIENT_HELLO{version, nonceS, id}
//	master → SERVER_HELLO{version, nonceM, proofM = HMAC(secret, master|nonceS|nonceM), id}
//	slave    checks proofM (a master without the secret is refused before
//	         any of its data is accepted)
//	slave  → AUTH{proofS = HMAC(secret, slave|nonceM|nonceS)}
//
// It returns the master's id. Errors wrap ErrAuth when the master's proof
// is wrong or the master refused ours (then the master closes).
func ClientAuth(c *Conn, secret, id string) (string, error) {
	nonceS, err := NewNonce()
	if err != nil {
		return "", err
	}
	if err := c.WriteFrame(true, FrameClientHello, Hello{Version: ProtocolVersion, Nonce: nonceS, ID: id}.Marshal()); err != nil {
		return "", fmt.Errorf("HA auth: send hello: %w", err)
	}
	f, err := c.ExpectFrame(FrameServerHello)
	if err != nil {
		return "", fmt.Errorf("HA auth: read master hello: %w", err)
	}
	h, err := DecodeHello(f.Payload)
	if err != nil {
		return "", fmt.Errorf("HA auth: %w", err)
	}
	if h.Version != ProtocolVersion {
		return "", fmt.Errorf("HA auth: master speaks protocol %d, this node %d: %w", h.Version, ProtocolVersion, ErrAuth)
	}
	want := Proof(secret, labelMaster, nonceS, h.Nonce)
	if !hmac.Equal(want[:], h.Proof[:]) {
		c.SendError(CodeAuth, "master proof refused")
		return "", fmt.Errorf("HA auth: master %q does not know the shared secret: %w", h.ID, ErrAuth)
	}
	if err := c.WriteFrame(true, FrameAuth, Auth{Proof: Proof(secret, labelSlave, h.Nonce, nonceS)}.Marshal()); err != nil {
		return "", fmt.Errorf("HA auth: send proof: %w", err)
	}
	return h.ID, nil
}

// ServerAuth runs the master (accepting) side of the challenge described
// at ClientAuth and returns the slave's id. A wrong proof, version or frame
// is answered with an ERROR frame (CodeAuth) and an error wrapping ErrAuth;
// the caller closes the connection.
func ServerAuth(c *Conn, secret, id string) (string, error) {
	f, err := c.ExpectFrame(FrameClientHello)
	if err != nil {
		return "", fmt.Errorf("HA auth: read slave hello: %w: %w", ErrAuth, err)
	}
	h, err := DecodeHello(f.Payload)
	if err != nil {
		c.SendError(CodeAuth, "malformed hello")
		return "", fmt.Errorf("HA auth: %w: %w", ErrAuth, err)
	}
	if h.Version != ProtocolVersion {
		c.SendError(CodeAuth, fmt.Sprintf("protocol version %d not supported (want %d)", h.Version, ProtocolVersion))
		return "", fmt.Errorf("HA auth: slave %q speaks protocol %d: %w", h.ID, h.Version, ErrAuth)
	}
	nonceM, err := NewNonce()
	if err != nil {
		return "", err
	}
	reply := Hello{Version: ProtocolVersion, Nonce: nonceM, Proof: Proof(secret, labelMaster, h.Nonce, nonceM), ID: id}
	if err := c.WriteFrame(true, FrameServerHello, reply.Marshal()); err != nil {
		return "", fmt.Errorf("HA auth: send hello: %w", err)
	}
	f, err = c.ExpectFrame(FrameAuth)
	if err != nil {
		return "", fmt.Errorf("HA auth: read slave proof: %w: %w", ErrAuth, err)
	}
	a, err := DecodeAuth(f.Payload)
	if err != nil {
		c.SendError(CodeAuth, "malformed proof")
		return "", fmt.Errorf("HA auth: %w: %w", ErrAuth, err)
	}
	want := Proof(secret, labelSlave, nonceM, h.Nonce)
	if !hmac.Equal(want[:], a.Proof[:]) {
		c.SendError(CodeAuth, "authentication failed")
		return "", fmt.Errorf("HA auth: slave %q sent a wrong proof (different secret?): %w", h.ID, ErrAuth)
	}
	return h.ID, nil
}
