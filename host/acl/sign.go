package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"slices"

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
// in standard Base64. A field given twice counts once, with its last value.
func Sign(cmd *remoting.Command, secret string, withToken bool) string {
	fields := cmd.ExtFields.Map()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		switch k {
		case FieldSignature, fieldUniqueKeyQuery:
			continue
		case FieldSecurityToken:
			if !withToken {
				continue
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	mac := hmac.New(sha1.New, []byte(secret))
	for _, k := range keys {
		mac.Write([]byte(fields[k]))
	}
	mac.Write(cmd.Body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// signatureValid reports whether cmd carries a valid signature under
// secret. A request with a SecurityToken is accepted signed with it (the
// Java client) or without it (rocketmq-client-go sends the token but
// does not sign it).
func signatureValid(cmd *remoting.Command, secret string) bool {
	got := []byte(cmd.Ext(FieldSignature))
	if len(got) == 0 {
		return false
	}
	if hmac.Equal(got, []byte(Sign(cmd, secret, true))) {
		return true
	}
	if _, ok := cmd.ExtFields.Get(FieldSecurityToken); ok {
		return hmac.Equal(got, []byte(Sign(cmd, secret, false)))
	}
	return false
}
