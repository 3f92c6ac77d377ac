package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"hash"
	"sync"

	"github.com/keelmq/keel/host/remoting"
)

// The header fields of a signed request (RocketMQ's SessionCredentials).
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
	// fieldUniqueKeyQuery is left out of what is signed, as RocketMQ
	// 4.9's broker leaves it out.
	fieldUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
)

// Sign returns the signature of cmd under secret, as RocketMQ's clients
// compute it (AclClientRPCHook, rocketmq-client-go's ACLInterceptor): the
// values of cmd's header fields sorted by key, Signature and
// _UNIQUE_KEY_QUERY left out (and SecurityToken too when withToken is
// false), concatenated, then the body; HMAC-SHA1 of that with secret,
// in standard Base64. A field given twice counts once, with its last value
// (remoting.Fields.Unique).
func Sign(cmd *remoting.Command, secret string, withToken bool) string {
	sum := newSigner(secret).sum(cmd, withToken)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// signer computes signatures under one secret key, reusing its HMAC
// states and buffers (a check must not allocate per request).
type signer struct{ states sync.Pool }

// signState is one HMAC under the signer's secret and the buffer the
// header values are gathered in.
type signState struct {
	mac     hash.Hash
	content []byte
}

func newSigner(secret string) *signer {
	s := &signer{}
	s.states.New = func() any { return &signState{mac: hmac.New(sha1.New, []byte(secret)), content: make([]byte, 0, 512)} }
	return s
}

// sum is the raw signature of cmd (see Sign).
func (s *signer) sum(cmd *remoting.Command, withToken bool) (out [sha1.Size]byte) {
	var small [32]remoting.Field
	st := s.states.Get().(*signState)
	content := st.content[:0]
	for _, f := range cmd.ExtFields.Unique(small[:0]) {
		switch f.Key {
		case FieldSignature, fieldUniqueKeyQuery:
			continue
		case FieldSecurityToken:
			if !withToken {
				continue
			}
		}
		content = append(content, f.Value...)
	}
	st.mac.Reset()
	st.mac.Write(content)
	st.mac.Write(cmd.Body)
	st.mac.Sum(out[:0])
	if cap(content) <= 64<<10 {
		st.content = content // keep a grown buffer, within reason
	}
	s.states.Put(st)
	return out
}

// valid reports whether cmd carries a valid signature under the signer's
// secret. A request with a SecurityToken is accepted signed with it (the
// Java client) or without it (rocketmq-client-go sends the token but
// does not sign it).
func (s *signer) valid(cmd *remoting.Command) bool {
	sig := cmd.Ext(FieldSignature)
	var got [sha1.Size]byte
	if base64.StdEncoding.DecodedLen(len(sig)) > 2*sha1.Size {
		return false
	}
	var dec [2 * sha1.Size]byte
	n, err := base64.StdEncoding.Decode(dec[:], []byte(sig))
	if err != nil || n != sha1.Size {
		return false
	}
	copy(got[:], dec[:n])
	if want := s.sum(cmd, true); hmac.Equal(got[:], want[:]) {
		return true
	}
	if _, ok := cmd.ExtFields.Get(FieldSecurityToken); ok {
		want := s.sum(cmd, false)
		return hmac.Equal(got[:], want[:])
	}
	return false
}
