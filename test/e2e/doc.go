// Package e2e holds keel's end-to-end tests: they build the keel binary,
// start `keel serve` as a child process on 127.0.0.1 (every port chosen by
// the kernel, a fresh data directory per test) and drive it with the real
// Apache RocketMQ Go client, github.com/apache/rocketmq-client-go/v2.
//
// The package has no non-test code. The tests are skipped with -short.
// Set KEEL_E2E_CLIENT_LOG=1 to see the client's own warnings and errors on
// stderr as they happen; otherwise they are kept in memory and printed only
// when a test fails.
package e2e
