// Package remoting speaks the Apache RocketMQ 4.x remoting protocol, so that
// unmodified RocketMQ clients (the Java client and
// github.com/apache/rocketmq-client-go/v2) can produce to and consume from a
// keel store. It contains the frame codec, a TCP server, the name server role
// (topic routes) and the broker role (send, pull, offsets, consumer groups),
// the latter written against the small Backend interface the host implements
// on top of the core store.
package remoting
