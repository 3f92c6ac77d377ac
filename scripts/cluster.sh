#!/usr/bin/env bash
# cluster.sh — run the shipped local cluster (configs/profiles/cluster/):
# three name servers with raft controllers and two broker groups of two
# brokers each, all on 127.0.0.1, data under data/cluster/.
#
#   scripts/cluster.sh          start (if not running), wait until every
#                               admin /status answers, print the listeners,
#                               then stay in the foreground; Ctrl-C stops all
#   scripts/cluster.sh start    the same, but return once everything is up
#   scripts/cluster.sh stop     stop what the pid files name (brokers first)
#   scripts/cluster.sh status   which processes run
#
# Pid files and logs: data/cluster/run/<name>.pid, data/cluster/logs/<name>.log.
# Every command is idempotent: starting a running cluster starts nothing
# new, stopping a stopped one does nothing. Run from the repository root
# (make cluster does).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
PROFILES=configs/profiles/cluster
RUN=data/cluster/run
LOGS=data/cluster/logs
KEEL=${KEEL:-bin/keel}
GO=${GO:-go}
# Controllers first: brokers wait for them to name their groups' masters.
NODES=(controller-1 controller-2 controller-3 broker-a-1 broker-a-2 broker-b-1 broker-b-2)
READY_TIMEOUT=${READY_TIMEOUT:-60} # seconds until every admin /status answers
STOP_TIMEOUT=${STOP_TIMEOUT:-30}   # seconds a process gets after SIGTERM

# profile_value NAME SECTION KEY: a string value of the profile's
# [SECTION] KEY (the shipped profiles write one `key = "value"` a line).
profile_value() {
	awk -v sec="[$2]" -v key="$3" '
		/^\[/ { in_sec = ($1 == sec); next }
		in_sec && $1 == key { v = $3; gsub(/"/, "", v); print v; exit }
	' "$PROFILES/$1.toml"
}

# pid_of NAME: the pid of NAME's keel process if it runs, else nothing.
# A pid file whose process is gone, or is not this node's `keel serve`
# (a reused pid), is removed.
pid_of() {
	local f="$RUN/$1.pid" pid
	[[ -f $f ]] || return 0
	pid=$(<"$f")
	if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "serve --profile $PROFILES/$1.toml"; then
		echo "$pid"
	else
		rm -f "$f"
	fi
}

build() {
	# go build is incremental: a no-op when bin/keel is current.
	echo "building $KEEL"
	"$GO" build -o "$KEEL" ./cmd/keel
}

start() {
	mkdir -p "$RUN" "$LOGS"
	build
	local name pid started=0
	for name in "${NODES[@]}"; do
		if pid=$(pid_of "$name") && [[ -n $pid ]]; then
			echo "$name already runs (pid $pid)"
			continue
		fi
		# Its own session: a Ctrl-C in the terminal reaches only this
		# script, which stops the nodes in order.
		setsid "$KEEL" serve --profile "$PROFILES/$name.toml" >>"$LOGS/$name.log" 2>&1 </dev/null &
		echo $! >"$RUN/$name.pid"
		started=$((started + 1))
	done
	echo "started $started process(es); waiting for every admin /status (up to ${READY_TIMEOUT}s)"
	local deadline=$((SECONDS + READY_TIMEOUT)) admin
	for name in "${NODES[@]}"; do
		admin=$(profile_value "$name" admin addr)
		until curl -fsS -o /dev/null "http://$admin/status" 2>/dev/null; do
			if [[ -z $(pid_of "$name") ]]; then
				echo "$name exited; last lines of $LOGS/$name.log:" >&2
				tail -n 20 "$LOGS/$name.log" >&2
				stop
				exit 1
			fi
			if ((SECONDS >= deadline)); then
				echo "$name: no answer from http://$admin/status within ${READY_TIMEOUT}s; see $LOGS/$name.log" >&2
				stop
				exit 1
			fi
			sleep 0.2
		done
	done
	listeners
}

listeners() {
	local name
	echo
	echo "cluster up (profiles in $PROFILES, logs in $LOGS):"
	for name in "${NODES[@]}"; do
		case $name in
		controller-*)
			printf '  %-13s pid %-7s namesrv %s  controller %s  raft %s  admin http://%s\n' "$name" "$(pid_of "$name")" \
				"$(profile_value "$name" server namesrv_addr)" "$(profile_value "$name" controller addr)" \
				"$(profile_value "$name" controller raft_addr)" "$(profile_value "$name" admin addr)"
			;;
		*)
			printf '  %-13s pid %-7s broker  %s  ha %s  admin http://%s\n' "$name" "$(pid_of "$name")" \
				"$(profile_value "$name" server broker_addr)" "$(profile_value "$name" server ha_addr)" \
				"$(profile_value "$name" admin addr)"
			;;
		esac
	done
	echo
	echo "clients: name servers 127.0.0.1:9876;127.0.0.1:9886;127.0.0.1:9896"
	echo "  $KEEL admin cluster status --controller 127.0.0.1:9878,127.0.0.1:9888,127.0.0.1:9898 --namesrv 127.0.0.1:9876"
	echo "  $KEEL admin status --admin 127.0.0.1:10914     # a broker"
}

# stop_one NAME: SIGTERM, wait STOP_TIMEOUT, then SIGKILL.
stop_one() {
	local name=$1 pid
	pid=$(pid_of "$name")
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + STOP_TIMEOUT))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			echo "$name (pid $pid) still runs ${STOP_TIMEOUT}s after SIGTERM: SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	rm -f "$RUN/$name.pid"
	echo "stopped $name (pid $pid)"
}

stop() {
	# Brokers first (they unregister from the name servers and stop
	# heartbeating), all at once; then the controllers.
	stop_all broker-a-1 broker-a-2 broker-b-1 broker-b-2
	stop_all controller-1 controller-2 controller-3
}

# stop_all NAME...: stop_one each, in parallel, waiting for those jobs
# only (not for the nodes this shell started).
stop_all() {
	local name jobs=()
	for name in "$@"; do
		stop_one "$name" &
		jobs+=($!)
	done
	wait "${jobs[@]}"
}

status() {
	local name pid
	for name in "${NODES[@]}"; do
		pid=$(pid_of "$name")
		printf '%-13s %s\n' "$name" "${pid:+runs (pid $pid)}${pid:-stopped}"
	done
}

# foreground: start, then wait until Ctrl-C (stop everything) or until
# every process is gone (make cluster-stop from another terminal).
foreground() {
	trap 'echo; echo "stopping the cluster"; stop; exit 0' INT TERM
	start
	echo "Ctrl-C (or make cluster-stop) stops the cluster"
	local name alive
	while :; do
		alive=0
		for name in "${NODES[@]}"; do
			[[ -n $(pid_of "$name") ]] && alive=$((alive + 1))
		done
		if ((alive == 0)); then
			echo "every cluster process has exited"
			exit 0
		fi
		sleep 1 &
		wait $! || true
	done
}

case ${1:-run} in
run) foreground ;;
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 [run|start|stop|status]" >&2
	exit 2
	;;
esac
