#!/usr/bin/env bash
# Soak: a recording server under several concurrent clients with different
# request mixes, two workers of world size 2 (every byte checked per rank),
# clients killed mid-request, connections that vanish mid-message, clients
# that truncate their region and that unregister it mid-request
# (tests/tools/attack.c's attacks, in a loop), clear calls racing
# everything, and a burst of garbage, for SOAK_SECONDS (default 20;
# scripts/soak runs it longer). At the end: 0 corrupt chunks, L1 memcheck
# clean, no lock left held once the TTLs pass, the trace's counts equal the
# server's counters, and a replay of the trace completes with 0 failed
# records.
# Usage: test_soak.sh path/to/lmcache path/to/tools-dir
set -u
LMCACHE=$(realpath "${1:?usage: $0 lmcache tools-dir}")
TOOLS=$(realpath "${2:?usage: $0 lmcache tools-dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
MOONCAKE="$HERE/../../../shared/traces/mooncake/mooncake_synthetic_trace.jsonl"
SECONDS_TOTAL=${SOAK_SECONDS:-20}
TTL=5
T=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    # Regions of clients the test killed (only theirs: other runs may share /dev/shm).
    [ -f "$T/killed" ] && while read -r c; do rm -f /dev/shm/lmcache-client-"$c"-* 2>/dev/null; done < "$T/killed"
    rm -rf "$T"
}
trap cleanup EXIT
pass=0 fail=0
expect() { if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi; }
P=lmcache.v1.distributed.storage_manager.StorageManager

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
mkdir -p "$T/l2"
# The trace must hold every call (its counts are checked against the counters): a queue that
# does not overflow (and drop records) when the clients keep both cores busy.
LMCACHE_LOG_LEVEL=INFO "$LMCACHE" server --port "$PORT" --max-workers 2 --l1-size-gb 0.02 \
    --eviction-policy LRU --l1-read-ttl-seconds $TTL --l1-write-ttl-seconds $TTL \
    --l2-adapter "{\"type\": \"fs\", \"base_path\": \"$T/l2\"}" \
    --trace-level storage --trace-output "$T/soak.lct" --counters-output "$T/counters.json" \
    --event-bus-queue-size 100000 \
    2> "$T/server.log" &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 1 100); do
    grep -q "listening on" "$T/server.log" 2>/dev/null && break
    sleep 0.1
done

END=$(( $(date +%s) + SECONDS_TOTAL ))
BENCH=(--port "$PORT" --bytes-per-token 16 --json --timeout-ms 60000)

# Client A: synthetic chats, one after another.
( i=0; while [ "$(date +%s)" -lt "$END" ]; do
      i=$((i + 1))
      "$LMCACHE" bench server "${BENCH[@]}" --users 6 --rounds 3 --seed "$i" > "$T/a.$i.json" 2> "$T/a.$i.err" || echo "a.$i" >> "$T/failed"
  done ) &
A=$!
# Client B: Mooncake requests, two threads.
( i=0; while [ "$(date +%s)" -lt "$END" ]; do
      i=$((i + 1))
      "$LMCACHE" bench server "${BENCH[@]}" --trace "$MOONCAKE" --max-requests 40 --time-scale 0 \
          --concurrency 2 > "$T/b.$i.json" 2> "$T/b.$i.err" || echo "b.$i" >> "$T/failed"
  done ) &
B=$!
# Client C: killed mid-run, again and again (it vanishes holding lookups).
( while [ "$(date +%s)" -lt "$END" ]; do
      "$LMCACHE" bench server "${BENCH[@]}" --users 8 --rounds 4 --seed 99 > /dev/null 2>&1 &
      c=$!
      echo "$c" >> "$T/killed"
      sleep 0.$((RANDOM % 9 + 1))
      kill -9 "$c" 2>/dev/null
      wait "$c" 2>/dev/null
      rm -f /dev/shm/lmcache-client-"$c"-* 2>/dev/null
  done ) &
C=$!
# Client E: world size 2, one process holding both workers' regions.
"$TOOLS/attack" soak-ws2 127.0.0.1 "$PORT" "$SECONDS_TOTAL" > "$T/ws2.out" 2>&1 &
E=$!
# Client F: connections that send part of a request and vanish.
"$TOOLS/attack" soak-vanish 127.0.0.1 "$PORT" "$SECONDS_TOTAL" > "$T/vanish.out" 2>&1 &
F=$!
# Client G: truncates its region under its own stores and retrieves, and grows it back.
"$TOOLS/attack" soak-truncate 127.0.0.1 "$PORT" "$SECONDS_TOTAL" > "$T/truncate.out" 2>&1 &
G=$!
# Client H: unregisters (and re-registers) its region while its requests are in flight.
"$TOOLS/attack" soak-unregister 127.0.0.1 "$PORT" "$SECONDS_TOTAL" > "$T/unregister.out" 2>&1 &
H=$!
# Clears racing everything, and one burst of garbage.
"$TOOLS/clear_loop" 127.0.0.1 "$PORT" "$SECONDS_TOTAL" 300 > "$T/clear.out" 2>&1 &
D=$!
"$TOOLS/send_garbage" 127.0.0.1 "$PORT" 200 > "$T/garbage.out" 2>&1
rc=$?; expect "garbage gets error replies: $(cat "$T/garbage.out")" $rc
wait "$A" "$B" "$C"
wait "$D"; rc=$?; expect "clear calls succeed: $(cat "$T/clear.out")" $rc
wait "$E"; rc=$?; expect "world size 2: every byte checked, no call failed: $(cat "$T/ws2.out")" $rc
wait "$F"; rc=$?; expect "vanishing connections: $(cat "$T/vanish.out")" $rc
wait "$G"; rc=$?; expect "truncated regions: the server held, what read back was right: $(cat "$T/truncate.out")" $rc
wait "$H"; rc=$?; expect "unregister mid-request: every request answered: $(cat "$T/unregister.out")" $rc

runs=$(ls "$T"/a.*.json "$T"/b.*.json 2>/dev/null | wc -l)
[ "$runs" -ge 2 ]; expect "clients completed runs ($runs)" $?
first_failed=$(head -1 "$T/failed" 2>/dev/null)
[ ! -f "$T/failed" ]
rc=$?
expect "every client run exited 0 ($(cat "$T/failed" 2>/dev/null | tr '\n' ' ')${first_failed:+: $(tail -1 "$T/$first_failed.err")})" $rc
bad=$(grep -L '"corrupt_chunks": 0' "$T"/a.*.json "$T"/b.*.json 2>/dev/null | wc -l)
[ "$bad" = 0 ]; expect "0 corrupt chunks in every run" $?
requests=$(cat "$T"/a.*.json "$T"/b.*.json 2>/dev/null | sed -n 's/.*"requests": \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}')
echo "soak: $runs client runs, $requests requests verified, $SECONDS_TOTAL s"
cat "$T/ws2.out" "$T/vanish.out" "$T/truncate.out" "$T/unregister.out"

# Let every lock's TTL pass, then stop: the shutdown audit must find none held.
sleep $((TTL + 1))
kill -TERM "$SERVER"
wait "$SERVER"
rc=$?
# A sanitizer's report (a leak at exit) is in the server's log: show it.
[ "$rc" = 0 ] || tail -40 "$T/server.log"
expect "the server shuts down cleanly (rc $rc)" $rc
grep -q '"memcheck_ok": true' "$T/counters.json"; expect "L1 memcheck is clean" $?
grep -q '"l1_locked_bytes_at_exit": 0' "$T/counters.json"
rc=$?; expect "no lock is left held after the TTLs ($(sed -n 's/.*"l1_locked_bytes_at_exit": \([0-9]*\).*/\1/p' "$T/counters.json") bytes)" $rc

"$LMCACHE" trace info "$T/soak.lct" > "$T/info.txt"
expect "trace info reads the soak trace" $?
# The event bus drops (and counts, in the trace's dropped_records) what it has no room for
# when the clients keep both cores busy: each count equals the counter but for records the
# trace says it dropped, and none is lost without being counted.
dropped=$(sed -n 's/^  dropped_records: *\([0-9]*\)$/\1/p' "$T/info.txt")
missing=0
for op in reserve_write finish_write submit_prefetch_task finish_read_prefetched \
    read_prefetched_results.__enter__ read_prefetched_results.__exit__; do
    want=$(sed -n "s/.*\"$op\": \([0-9]*\).*/\1/p" "$T/counters.json")
    got=$(sed -n "s/^    $P\.$op: \([0-9]*\)$/\1/p" "$T/info.txt")
    [ -n "$want" ] && [ "${got:-0}" -le "$want" ]
    expect "trace count of $op (${got:-0}) is the server's counter (${want:-missing}) but for drops" $?
    missing=$((missing + ${want:-0} - ${got:-0}))
done
[ "$missing" -le "${dropped:-0}" ]
expect "every record the trace lacks is counted as dropped ($missing missing, ${dropped:-0} dropped)" $?
echo "soak: the trace dropped ${dropped:-0} record(s)"
records=$(sed -n 's/^  total_records: *\([0-9]*\)$/\1/p' "$T/info.txt")

mkdir -p "$T/replay" "$T/l2r"
"$LMCACHE" trace replay "$T/soak.lct" --l1-size-gb 0.02 --eviction-policy LRU \
    --l2-adapter "{\"type\": \"fs\", \"base_path\": \"$T/l2r\"}" --output-dir "$T/replay" \
    --time-scale 0.25 -q > /dev/null 2> "$T/replay.err"
expect "the replay of $records records completes with 0 failed" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
