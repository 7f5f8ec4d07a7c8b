#!/usr/bin/env bash
# `lmcache server` end to end: record a Mooncake workload with tracing, check
# the trace against the server's own call counters, replay it, survive
# garbage, and leave readable traces after SIGTERM and kill -9.
# Usage: test_server.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"

# start_traced PORT LOG TRACE [server flags...]: start_server, tracing to TRACE.
start_traced() {
    local port=$1 log=$2 trace=$3
    shift 3
    LMCACHE_LOG_LEVEL=INFO start_server "$port" "$log" --max-workers 2 --l1-size-gb 0.03 \
        --eviction-policy LRU --trace-level storage --trace-output "$trace" "$@"
}

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
P=lmcache.v1.distributed.storage_manager.StorageManager

# --- 1. record a workload, stop with SIGTERM ---------------------------------
PORT=$(free_port)
mkdir -p "$T/l2"
start_traced "$PORT" "$T/server.log" "$T/rec.lct" \
    --l2-adapter "{\"type\": \"fs\", \"base_path\": \"$T/l2\"}" --counters-output "$T/counters.json"
expect "the server starts" $?

"$LMCACHE" bench server --port "$PORT" --trace "$MOONCAKE" --max-requests 150 --time-scale 0.01 \
    --concurrency 2 --bytes-per-token 16 --json > "$T/bench.json" 2> "$T/bench.err"
rc=$?
expect "bench server exits 0 (no corrupt chunk)" $rc
grep -q '"corrupt_chunks": 0' "$T/bench.json"; expect "bench reports 0 corrupt chunks" $?
hit=$(sed -n 's/.*"hit_rate": \([0-9.e+-]*\).*/\1/p' "$T/bench.json")
awk -v h="${hit:-0}" 'BEGIN { exit !(h > 0) }'; expect "bench reports a non-zero hit rate ($hit)" $?

# Garbage, then a normal client is still served.
"$TOOLS/send_garbage" 127.0.0.1 "$PORT" 400 > "$T/garbage.out" 2>&1
_st=$?; expect "garbage gets error replies and the server stays up: $(cat "$T/garbage.out")" $_st
"$LMCACHE" bench server --port "$PORT" --users 2 --rounds 2 --bytes-per-token 16 --json > "$T/bench2.json" 2>/dev/null
expect "a normal client is served after the garbage" $?

kill -TERM "$SERVER"
wait "$SERVER"
expect "SIGTERM shuts the server down with status 0" $?
grep -q "trace file $T/rec.lct" "$T/server.log"; expect "the log names the trace file" $?
grep -q "L1 pool faulted in: 0.03 GiB" "$T/server.log"; expect "the server faulted its L1 pool in" $?

# Trace counts equal the server's counters.
"$LMCACHE" trace info "$T/rec.lct" > "$T/info.txt"
expect "trace info reads the recorded trace" $?
for op in reserve_write finish_write submit_prefetch_task finish_read_prefetched \
    read_prefetched_results.__enter__ read_prefetched_results.__exit__; do
    want=$(sed -n "s/.*\"$op\": \([0-9]*\).*/\1/p" "$T/counters.json")
    got=$(sed -n "s/^    $P\.$op: \([0-9]*\)$/\1/p" "$T/info.txt")
    [ "${got:-0}" = "${want:-missing}" ]
    expect "trace count of $op (${got:-0}) equals the server's counter (${want:-missing})" $?
done

# Replay with 0 failed records.
mkdir -p "$T/replay" "$T/l2r"
"$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb 0.03 --eviction-policy LRU \
    --l2-adapter "{\"type\": \"fs\", \"base_path\": \"$T/l2r\"}" --output-dir "$T/replay" \
    --time-scale 0.5 > "$T/replay.out" 2> "$T/replay.err"
expect "the replay exits 0" $?
grep -q "Records failed:  *0$" "$T/replay.out"; expect "the replay has 0 failed records" $?

# --- 2. kill -9 of a recording server leaves a readable trace ------------------
PORT=$(free_port)
start_traced "$PORT" "$T/server9.log" "$T/kill9.lct"
expect "a second server starts" $?
"$LMCACHE" bench server --port "$PORT" --users 4 --rounds 3 > /dev/null 2>&1
kill -9 "$SERVER"
wait "$SERVER" 2>/dev/null
"$LMCACHE" trace info "$T/kill9.lct" > "$T/info9.txt" 2>&1
expect "trace info reads the trace of a killed server" $?
grep -q "level:                      storage" "$T/info9.txt"; expect "the killed server's trace has a header" $?

# --- 3. bad flags ----------------------------------------------------------------
err=$("$LMCACHE" server --l1-size-gb 0.01 --eviction-policy LRU --trace-level gpu 2>&1); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "unsupported trace level"; expect "--trace-level gpu exits 2" $?
err=$("$LMCACHE" server --eviction-policy LRU 2>&1); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--l1-size-gb"; expect "a missing --l1-size-gb exits 2" $?
err=$("$LMCACHE" bench server --port 1 --users 2 --rounds 1 --timeout-ms 500 2>&1); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "127.0.0.1:1"; expect "bench against no server exits 1 naming it" $?

# --- 4. a --counters-output that cannot be written ----------------------------------
# At the start, before serving: through a planted symlink (its target is kept), or in
# a missing directory. At the end (a full disk): the error is logged, exit status 1.
echo keep > "$T/victim"
ln -s "$T/victim" "$T/counters-link.json"
expect_rc "--counters-output through a symlink stops the start with status 1" 1 \
    "$LMCACHE" server --port "$(free_port)" --l1-size-gb 0.01 --eviction-policy LRU \
    --counters-output "$T/counters-link.json"
grep -q "cannot write --counters-output '$T/counters-link.json': it is a symbolic link" "$T/err"
expect "the symlink refusal names the flag and the path" $?
[ "$(cat "$T/victim")" = keep ]; expect "the symlink's target is left as it was" $?
expect_rc "--counters-output in a missing directory stops the start with status 1" 1 \
    "$LMCACHE" server --port "$(free_port)" --l1-size-gb 0.01 --eviction-policy LRU \
    --counters-output "$T/no/such/dir/c.json"
grep -q "cannot write --counters-output '$T/no/such/dir/c.json': cannot create it" "$T/err"
expect "the missing directory's error names the path" $?
if [ -c /dev/full ]; then
    start_server "$(free_port)" "$T/full.log" --l1-size-gb 0.01 --eviction-policy LRU \
        --counters-output /dev/full
    expect "a server whose --counters-output is a full device starts" $?
    kill -TERM "$SERVER"
    wait "$SERVER"
    rc=$?
    [ "$rc" = 1 ]; expect "it exits 1 when the counters cannot be written at the end (got $rc)" $?
    grep -q "cannot write --counters-output '/dev/full': No space left on device" "$T/full.log"
    expect "it logs why the counters were not written" $?
else
    echo "SKIP: no /dev/full here: the full-device counters case is not run"
fi

# --- 5. the L1 prefault: off with --no-l1-prefault, skipped for a pool over RAM --------
LMCACHE_LOG_LEVEL=INFO start_server "$(free_port)" "$T/nopf.log" --l1-size-gb 0.03 \
    --eviction-policy LRU --no-l1-prefault
expect "a server with --no-l1-prefault starts" $?
sleep 0.5
kill -TERM "$SERVER"
wait "$SERVER"
expect "it stops cleanly" $?
! grep -q "faulted in" "$T/nopf.log"; expect "--no-l1-prefault faults nothing in" $?
ram_gib=$(awk '/^MemTotal:/ { printf "%d", $2 / 1048576 + 2 }' /proc/meminfo)
LMCACHE_LOG_LEVEL=INFO start_server "$(free_port)" "$T/overram.log" --l1-size-gb "$ram_gib" \
    --eviction-policy LRU --allow-l1-over-ram
expect "a server with an L1 pool over RAM starts (--allow-l1-over-ram, $ram_gib GiB)" $?
kill -TERM "$SERVER"
wait "$SERVER"
expect "it stops cleanly" $?
grep -q "larger than physical memory (--allow-l1-over-ram): not faulting it in" "$T/overram.log"
expect "a pool over RAM is not faulted in, and the log says so" $?

# --- 6. copy helpers: a transfer's chunks shared by 3 threads, every byte checked -------
expect_rc "--copy-threads 0 exits 2" 2 "$LMCACHE" server --port "$(free_port)" \
    --l1-size-gb 0.01 --eviction-policy LRU --copy-threads 0
grep -q -- "--copy-threads" "$T/err"; expect "the refusal names --copy-threads" $?
port=$(free_port)
LMCACHE_LOG_LEVEL=INFO start_server "$port" "$T/copy.log" --l1-size-gb 0.3 \
    --eviction-policy LRU --copy-threads 3
expect "a server with --copy-threads 3 starts" $?
grep -q "1 worker(s), 3 copy thread(s) per transfer" "$T/copy.log"
expect "its log gives the copy threads" $?
# 1 MiB chunks (256 tokens x 4096 B): transfers of 2 chunks or more are shared with the helpers.
"$LMCACHE" bench server --port "$port" --users 3 --rounds 3 --groups 1 --system-len 1024 \
    --prompt-len 1024 --answer-len 256 --bytes-per-token 4096 --blocks 2048 \
    --concurrency 2 > "$T/copy.out" 2>&1
expect "bench server against it succeeds" $?
grep -q "corrupt chunks: *0$" "$T/copy.out" && grep -q "errors: *0$" "$T/copy.out" &&
    grep -Eq "hit chunks: *[1-9]" "$T/copy.out"
expect "every retrieved byte is the stored one, with hits and no errors" $?
kill -TERM "$SERVER"
wait "$SERVER"
expect "it stops cleanly" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
