#!/usr/bin/env bash
# Attacks on `lmcache server`'s sessions, limits, connections and files
# (issue 12 items 5, 6, 8, 9, 10), run in turn against one server, then a
# normal `lmcache bench server` run that verifies every byte: the server is
# alive and answers every client, 0 corrupt chunks, memcheck clean, no lock
# left once the sessions end, and its RSS back within 10% of its baseline
# (after a warm-up bench run). A second server with a slow L2 checks that
# free_lookup_locks never parks the only worker. The attacks are the
# subcommands of tests/tools/attack_sessions.
# Usage: test_attack_sessions.sh path/to/lmcache path/to/tools-dir
set -u
LMCACHE=$(realpath "${1:?usage: $0 lmcache tools-dir}")
TOOLS=$(realpath "${2:?usage: $0 lmcache tools-dir}")
ATTACK="$TOOLS/attack_sessions"
T=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
pass=0 fail=0
expect() { if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000))
}
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }

start_server() { # port log extra-args...
    local port=$1 log=$2
    shift 2
    LMCACHE_LOG_LEVEL=INFO "$LMCACHE" server --port "$port" --l1-size-gb 0.02 --eviction-policy LRU \
        "$@" 2> "$log" &
    SERVER=$!
    PIDS+=("$SERVER")
    for _ in $(seq 1 100); do
        grep -q "listening on" "$log" 2>/dev/null && return 0
        kill -0 "$SERVER" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Under a sanitizer RSS says nothing (ASan's quarantine keeps freed memory): reported only.
if ldd "$LMCACHE" 2>/dev/null | grep -q 'lib[at]san'; then
    export ATTACK_NO_RSS=1
fi

TTL=4
MSG_TIMEOUT=2
MAX_CONNS=64
MAX_SESSIONS=3000
BENCH=(--bytes-per-token 1024 --blocks 2048 --users 16 --rounds 4 --concurrency 2 --json --timeout-ms 60000)

# --- one server, every attack in turn -----------------------------------------
PORT=$(free_port)
start_server "$PORT" "$T/server.log" --max-workers 2 --session-ttl-s $TTL \
    --message-timeout-s $MSG_TIMEOUT --max-connections $MAX_CONNS --max-cache-salts 2000 --max-sessions $MAX_SESSIONS \
    --l1-read-ttl-seconds 60 --counters-output "$T/counters.json"
expect "the server starts" $?
SRV=$SERVER

# Warm-up: L1 (0.02 GiB) fills and cycles several times over with 256 KiB chunks, so all
# of its pages count in the baseline.
for seed in 1 3; do
    "$LMCACHE" bench server --port "$PORT" "${BENCH[@]}" --seed $seed > "$T/warm.json" 2> "$T/warm.err"
    expect "warm-up bench run $seed succeeds" $?
done
BASE=$(rss_kb "$SRV")

run() { # name args...
    local name=$1
    shift
    "$ATTACK" 127.0.0.1 "$PORT" "$name" "$@" > "$T/$name.out" 2>&1
    local rc=$?
    cat "$T/$name.out"
    expect "attack $name: $(tail -1 "$T/$name.out")" $rc
    kill -0 "$SRV" 2>/dev/null
    expect "the server is alive after $name" $?
}
run log-forge
run steal
run ws2
run big-lookup
run keys
run salts
run unfinished 200 "$SRV"
run flood "$SRV"
run conns $MAX_CONNS
run slowloris $MSG_TIMEOUT
run sessions $MAX_SESSIONS
AFTER=$(rss_kb "$SRV")

# Forged lines: every log line starts with a timestamp; none starts with the client's text.
! grep -q '^FORGED-LINE' "$T/server.log"
expect "client strings cannot forge log lines" $?
grep -q 'attack-log\\nFORGED-LINE' "$T/server.log"
expect "the client string is logged escaped" $?
! grep -q 'write_locked' "$T/server.log"
expect "the log never calls a key write_locked" $?

# Sessions nobody ended expire (--session-ttl-s); then a normal run verifies every byte.
sleep $((TTL * 2))
"$LMCACHE" bench server --port "$PORT" "${BENCH[@]}" --seed 2 > "$T/final.json" 2> "$T/final.err"
expect "the final bench run succeeds: $(tail -2 "$T/final.err")" $?
grep -q '"corrupt_chunks": 0' "$T/final.json"
expect "the final bench run finds 0 corrupt chunks" $?
grep -q '"errors": 0' "$T/final.json"
expect "the final bench run gets no error" $?
sleep 2 # idle: the server gives back what it freed
END=$(rss_kb "$SRV")
echo "server RSS: baseline ${BASE} kB, after the attacks ${AFTER} kB, at the end ${END} kB"
if [ -z "${ATTACK_NO_RSS:-}" ]; then
    awk -v b="$BASE" -v e="$END" 'BEGIN { exit !(e <= b * 1.10) }'
    expect "RSS is back within 10% of its baseline (${BASE} -> ${END} kB)" $?
fi

kill -TERM "$SRV"
wait "$SRV"
expect "the server exits 0 on SIGTERM" $?
grep -q '"memcheck_ok": true' "$T/counters.json"
expect "memcheck is clean" $?
grep -q '"l1_locked_bytes_at_exit": 0}' "$T/counters.json"
expect "no lock is left once the sessions ended: $(cat "$T/counters.json")" $?

# --- a slow L2 and one worker --------------------------------------------------
PORT=$(free_port)
mkdir -p "$T/l2"
start_server "$PORT" "$T/slow.log" --max-workers 1 --l2-adapter \
    "{\"type\": \"fault_inject\", \"delay_rate\": 1, \"delay_ms\": 3000, \"inner\": {\"type\": \"fs\", \"base_path\": \"$T/l2\"}}"
expect "the slow-L2 server starts" $?
"$ATTACK" 127.0.0.1 "$PORT" slow-l2 > "$T/slow.out" 2>&1
expect "attack slow-l2: $(tail -1 "$T/slow.out")" $?
cat "$T/slow.out"
kill -TERM "$SERVER"
wait "$SERVER"

# --- start-up hardening --------------------------------------------------------
PORT=$(free_port)
start_server "$PORT" "$T/open.log" --host 0.0.0.0
expect "a server on 0.0.0.0 starts" $?
grep -q 'is not a loopback address and the server has no authentication' "$T/open.log"
expect "a non-loopback --host warns that there is no authentication" $?
kill -TERM "$SERVER"
wait "$SERVER"
"$LMCACHE" server --port "$PORT" --l1-size-gb 1048576 --eviction-policy LRU > /dev/null 2> "$T/huge.err"
[ $? = 2 ] && grep -q 'pass --allow-l1-over-ram' "$T/huge.err"
expect "an L1 pool above physical memory is refused: $(cat "$T/huge.err")" $?

echo "test_attack_sessions: $pass passed, $fail failed"
[ "$fail" = 0 ]
