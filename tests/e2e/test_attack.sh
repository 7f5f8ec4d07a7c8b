#!/usr/bin/env bash
# `lmcache server` under attack: against one server, run each attack in
# turn (tests/tools/attack.c plays the hostile client), and after each one
# check that the server answers a ping and serves a normal `lmcache bench
# server` run that verifies every byte. At the end the server stops cleanly
# with a clean memcheck and no L1 lock left.
# Usage: test_attack.sh path/to/lmcache path/to/tools-dir
#
# Adding an attack: write a function attack_<name> (exit status 0 when the
# server resisted) and add <name> to ATTACKS.
set -u
LMCACHE=$(realpath "${1:?usage: $0 lmcache tools-dir}")
TOOLS=$(realpath "${2:?usage: $0 lmcache tools-dir}")
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

PORT=$(free_port)
POOL_NAME="attack-$$"
POOL="lmcache_l1_pool_$POOL_NAME" # the server's L1 pool in /dev/shm
LMCACHE_LOG_LEVEL=INFO "$LMCACHE" server --port "$PORT" --max-workers 2 --l1-size-gb 0.06 \
    --eviction-policy LRU --shm-name "$POOL_NAME" --counters-output "$T/counters.json" \
    2> "$T/server.log" &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 1 100); do
    grep -q "listening on" "$T/server.log" 2>/dev/null && break
    sleep 0.1
done
grep -q "listening on" "$T/server.log"
expect "the server starts: $(tail -2 "$T/server.log")" $?

alive() { "$TOOLS/attack" ping 127.0.0.1 "$PORT"; }

# A normal client: every retrieved byte is checked; 0 corrupt chunks, 0 errors.
bench_ok() { # name
    "$LMCACHE" bench server --port "$PORT" --users 4 --rounds 3 --system-len 512 --prompt-len 256 \
        --bytes-per-token 64 --concurrency 2 --time-scale 0 --json > "$T/bench-$1.json" 2> "$T/bench-$1.err" &&
        grep -q '"corrupt_chunks": 0' "$T/bench-$1.json" && grep -q '"errors": 0' "$T/bench-$1.json"
}

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$SERVER/status" 2>/dev/null; }

# --- the attacks -------------------------------------------------------------------
attack_shm_steal() { "$TOOLS/attack" shm-steal 127.0.0.1 "$PORT" "$POOL"; }
attack_truncate() { "$TOOLS/attack" truncate 127.0.0.1 "$PORT"; }
attack_unregister_race() { "$TOOLS/attack" unregister-race 127.0.0.1 "$PORT"; }
attack_world_size() { "$TOOLS/attack" world-size 127.0.0.1 "$PORT"; }
attack_slots() { "$TOOLS/attack" slots 127.0.0.1 "$PORT"; }

# An operator's SIGTERM to a running bench: it stops, and its regions do not outlive it.
attack_bench_sigterm() {
    "$LMCACHE" bench server --port "$PORT" --users 64 --rounds 50 --time-scale 0 \
        > "$T/sigterm.out" 2> "$T/sigterm.err" &
    local b=$!
    sleep 1
    kill -TERM "$b"
    local waited=0
    while kill -0 "$b" 2>/dev/null && [ $waited -lt 200 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$b" 2>/dev/null; then
        echo "the bench did not stop within 20 s of SIGTERM"
        kill -9 "$b"
        return 1
    fi
    wait "$b"
    grep -q "interrupted" "$T/sigterm.err" || { echo "the bench did not report the interruption"; return 1; }
    local left
    left=$(ls /dev/shm/ 2>/dev/null | grep -c "^lmcache-client-$b-")
    [ "$left" = 0 ] || { echo "$left shm region(s) of the bench left in /dev/shm"; return 1; }
}

ATTACKS=(shm_steal truncate unregister_race world_size slots bench_sigterm)

bench_ok warmup
expect "a verified bench run before the attacks" $?
echo "server RSS after the warm-up: $(rss_kb) kB"

for a in "${ATTACKS[@]}"; do
    "attack_$a" > "$T/attack-$a.out" 2>&1
    expect "the server resists $a: $(grep -E 'VULNERABLE|FAIL|refusal|the bench' "$T/attack-$a.out" | head -3)" $?
    alive
    expect "the server answers a ping after $a" $?
    bench_ok "$a"
    expect "a verified bench run after $a: $(tail -2 "$T/bench-$a.err")" $?
done
echo "server RSS after the attacks: $(rss_kb) kB"

kill -TERM "$SERVER"
wait "$SERVER"
expect "SIGTERM stops the server with status 0" $?
grep -q '"memcheck_ok": true' "$T/counters.json"
expect "memcheck is clean at exit" $?
grep -q '"l1_locked_bytes_at_exit": 0' "$T/counters.json"
expect "no L1 lock is left at exit: $(cat "$T/counters.json" 2>/dev/null | tr ',' '\n' | grep locked)" $?
[ ! -e "/dev/shm/$POOL" ]
expect "the server removed its pool" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
