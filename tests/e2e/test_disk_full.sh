#!/usr/bin/env bash
# Recording onto a full disk: the trace goes to a 192 KiB tmpfs that the
# workload overflows. The server must keep serving (no corrupt chunk, no
# error), drop and count the records it cannot write, and leave a file that
# `trace info` reads. Needs root (mount); without it the test says so and fails.
# Usage: test_disk_full.sh path/to/lmcache path/to/tools-dir
set -u
LMCACHE=$(realpath "${1:?usage: $0 lmcache tools-dir}")
T=$(mktemp -d)
MNT="$T/small"
SERVER=""
cleanup() {
    [ -n "$SERVER" ] && kill -9 "$SERVER" 2>/dev/null
    umount "$MNT" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
pass=0 fail=0
expect() { if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi; }

mkdir -p "$MNT"
if ! mount -t tmpfs -o size=192k tmpfs "$MNT" 2>"$T/mount.err"; then
    echo "FAIL: cannot mount a small tmpfs (needs root): $(cat "$T/mount.err")"
    echo "0 passed, 1 failed"
    exit 1
fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
LMCACHE_LOG_LEVEL=INFO "$LMCACHE" server --port "$PORT" --l1-size-gb 0.05 --eviction-policy LRU \
    --trace-level storage --trace-output "$MNT/full.lct" 2> "$T/server.log" &
SERVER=$!
for _ in $(seq 1 100); do
    grep -q "listening on" "$T/server.log" 2>/dev/null && break
    sleep 0.1
done

"$LMCACHE" bench server --port "$PORT" --users 16 --rounds 6 --system-len 4096 --json \
    > "$T/bench.json" 2>/dev/null
expect "the server keeps serving while the trace disk is full" $?
grep -q '"corrupt_chunks": 0' "$T/bench.json" && grep -q '"errors": 0' "$T/bench.json"
expect "no corrupt chunk and no error" $?

kill -TERM "$SERVER"
wait "$SERVER"
expect "SIGTERM still shuts down cleanly" $?
SERVER=""
grep -Eq "trace file .*full.lct: [0-9]+ record\(s\), [1-9][0-9]* dropped" "$T/server.log"
expect "the log counts the dropped records" $?
grep -q "write failed" "$T/server.log"; expect "the write failure is logged" $?

"$LMCACHE" trace info "$MNT/full.lct" > "$T/info.txt" 2> "$T/info.err"
expect "trace info reads the file left on the full disk" $?
grep -q "level:                      storage" "$T/info.txt"; expect "the file has its header" $?
n=$(sed -n 's/^  total_records: *\([0-9]*\)$/\1/p' "$T/info.txt")
[ "${n:-0}" -gt 0 ]; expect "the file holds the records that fit (${n:-0})" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
