#!/usr/bin/env bash
# Recording onto a full disk: the trace goes to a 192 KiB tmpfs that the
# workload overflows. The server must keep serving (no corrupt chunk, no
# error), drop and count the records it cannot write, and leave a file that
# `trace info` reads. Needs root (mount); without it the test says so and fails.
# Usage: test_disk_full.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"
MNT="$T/small"

mkdir -p "$MNT"
if ! mount -t tmpfs -o size=192k tmpfs "$MNT" 2>"$T/mount.err"; then
    expect "cannot mount a small tmpfs (needs root): $(cat "$T/mount.err")" 1
    e2e_report test_disk_full
    exit 1
fi
# Unmounted at exit once the server is gone, before $T goes.
at_exit umount "$MNT"
PORT=$(free_port)
LMCACHE_LOG_LEVEL=INFO start_server "$PORT" "$T/server.log" --l1-size-gb 0.05 --eviction-policy LRU \
    --trace-level storage --trace-output "$MNT/full.lct"

"$LMCACHE" bench server --port "$PORT" --users 16 --rounds 6 --system-len 4096 --json \
    > "$T/bench.json" 2>/dev/null
expect "the server keeps serving while the trace disk is full" $?
grep -q '"corrupt_chunks": 0' "$T/bench.json" && grep -q '"errors": 0' "$T/bench.json"
expect "no corrupt chunk and no error" $?

kill -TERM "$SERVER"
wait "$SERVER"
expect "SIGTERM still shuts down cleanly" $?
grep -Eq "trace file .*full.lct: [0-9]+ record\(s\), [1-9][0-9]* dropped" "$T/server.log"
expect "the log counts the dropped records" $?
grep -q "write failed" "$T/server.log"; expect "the write failure is logged" $?

"$LMCACHE" trace info "$MNT/full.lct" > "$T/info.txt" 2> "$T/info.err"
expect "trace info reads the file left on the full disk" $?
grep -q "level:                      storage" "$T/info.txt"; expect "the file has its header" $?
n=$(sed -n 's/^  total_records: *\([0-9]*\)$/\1/p' "$T/info.txt")
[ "${n:-0}" -gt 0 ]; expect "the file holds the records that fit (${n:-0})" $?

e2e_report test_disk_full
