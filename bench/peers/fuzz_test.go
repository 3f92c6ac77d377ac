package peers

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzRESP feeds arbitrary bytes to the RESP reply reader: it must return
// a value or an error, never panic or over-read a bulk string.
func FuzzRESP(f *testing.F) {
	for _, s := range []string{"+OK\r\n", ":1\r\n", "$5\r\nhello\r\n", "$-1\r\n", "-ERR wrong\r\n", "$99\r\nshort\r\n", "*2\r\n", "", "\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &redisConn{r: bufio.NewReader(bytes.NewReader(data))}
		for i := 0; i < 4; i++ {
			v, err := c.read()
			if err != nil {
				return
			}
			if len(v) > len(data) {
				t.Fatalf("reply %d bytes longer than the input %d", len(v), len(data))
			}
		}
	})
}
