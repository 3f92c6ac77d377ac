# keel — make targets. `make test` is the test command; `make run` starts keel
# on its default profile.
GO        ?= go
BIN       := bin/keel
PROFILE   ?= configs/profiles/default.toml
GOFLAGS_T ?= -count=1
FUZZTIME  ?= 20s

.PHONY: all build test tidy-check test-short run cluster cluster-stop bench-quick bench lint fuzz clean

all: build

# keel itself, the benchmark suite's binary (`keel bench` runs the keelbench
# next to it) and the external plugin binaries (profiles load them from bin/).
build:
	$(GO) build -o $(BIN) ./cmd/keel
	$(GO) build -o bin/keelbench ./bench/cmd/keelbench
	$(GO) build -o bin/ ./plugins/flush-strategies/cmd/keel-flush ./plugins/index-hash/cmd/keel-index-hash ./plugins/replication-async/cmd/replication-async \
		./plugins/replication-sync/cmd/replication-sync ./sdk/examples/replication-echo/cmd/...

# Unit, property, crash and end-to-end tests. -race on all of keel's own
# packages; the end-to-end tests run keel as a separate process and drive
# it with the real rocketmq-client-go, whose own goroutines race with each
# other at consumer shutdown, so that package runs without -race. go.mod
# and go.sum must be tidy first (tidy-check). The last line runs the core
# again with its position assertions compiled in (the invariants build
# tag, pebble's habit: core/invariants*.go): a change of a position that
# breaks min <= dispatched <= confirm <= committed <= wrote or
# flushed <= committed panics, naming every position.
test: tidy-check
	$(GO) vet ./...
	$(GO) test $(GOFLAGS_T) -race -timeout 15m $$($(GO) list ./... | grep -v /test/e2e)
	$(GO) test $(GOFLAGS_T) -timeout 15m ./test/e2e/...
	$(GO) test $(GOFLAGS_T) -race -tags invariants -timeout 15m ./core/...

# Fails, showing the diff, when go.mod or go.sum is not what `go mod tidy`
# would write.
tidy-check:
	$(GO) mod tidy -diff

test-short:
	$(GO) test $(GOFLAGS_T) -short ./...

run: build
	./$(BIN) serve --profile $(PROFILE)

# The shipped local cluster (configs/profiles/cluster/: 3 name servers with
# raft controllers, 2 broker groups of master + slave): starts what is not
# running, waits until every node answers, prints the listeners and stays
# in the foreground; Ctrl-C or `make cluster-stop` stops it. Logs and pid
# files under data/cluster/.
cluster:
	scripts/cluster.sh

cluster-stop:
	scripts/cluster.sh stop

bench-quick: build
	./$(BIN) bench --config configs/bench/quick.toml --out bench-out/quick --quick

# The full matrix; installs redis-server for the Redis peer when it can
# (root with apt-get), otherwise the Redis cells are skipped with a note.
bench: build
	@command -v redis-server >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq redis-server >/dev/null) || echo "redis-server not installed: Redis peer cells will be skipped"; }
	./$(BIN) bench --config configs/bench/full.toml --out bench-out/full

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

# Run every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run=NONE -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin bench-out
