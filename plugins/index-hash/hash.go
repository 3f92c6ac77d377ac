package indexhash

import (
	"github.com/keelmq/keel/core/record"
)

// keyHash is RocketMQ's IndexService key hash of topic#key: Java's
// String.hashCode, made non-negative (abs, with MinInt32 mapped to 0).
func keyHash(topic, key string) int32 {
	return absHash(hashContinue(hashContinue(hashContinue(0, topic), "#"), key))
}

func absHash(h int32) int32 {
	if h < 0 {
		h = -h
		if h < 0 {
			return 0
		}
	}
	return h
}

// hashContinue extends a Java String.hashCode over s (record.JavaHashCode
// of a concatenation, computed piecewise without building it).
func hashContinue(h int32, s string) int32 {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			// Rare: non-ASCII keys. JavaHashCode(s[i:]) contributes
			// h*31^units + hash(rest).
			rest := s[i:]
			n := 0
			for _, r := range rest {
				n++
				if r >= 0x10000 {
					n++
				}
			}
			p := int32(1)
			for range n {
				p *= 31
			}
			return h*p + record.JavaHashCode(rest)
		}
		h = 31*h + int32(s[i])
	}
	return h
}
