#!/usr/bin/env bash
# `lmcache trace info|replay|record` end to end on small fixture traces.
# Usage: test_trace_cli.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"

CLI_DOC="$HERE/../../docs/cli.md"
for k in store cycle schema1 unknown long config badmagic empty; do
    "$TOOLS/make_trace" "$k" "$T/$k.lct" || { echo "cannot make fixture $k"; exit 1; }
done
SM="--l1-size-gb 0.01 --eviction-policy LRU"
P=lmcache.v1.distributed.storage_manager.StorageManager

# --- info -------------------------------------------------------------------
out=$("$LMCACHE" trace info "$T/cycle.lct"); rc=$?
expect "info exits 0" $rc
echo "$out" | grep -q "^Trace file: $T/cycle.lct$"; expect "info names the file" $?
echo "$out" | grep -q "^  level:                      storage$"; expect "info level row (width 28)" $?
echo "$out" | grep -q "^  trace_schema_version:       2$"; expect "info schema row" $?
echo "$out" | grep -q "^  duration:                   0.130s$"; expect "info duration" $?
echo "$out" | grep -q "^  total_records:              6$"; expect "info total" $?
echo "$out" | grep -q "^    $P.reserve_write: 1$"; expect "info per-op counts" $?
echo "$out" | grep -q "^    $P.read_prefetched_results.__enter__: 1$"; expect "info enter count" $?

err=$("$LMCACHE" trace info "$T/badmagic.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "badmagic.lct': bad magic (got b'WRNG', expected b'LMCT')"
expect "info on a bad magic exits 1 naming the file" $?
err=$("$LMCACHE" trace info "$T/empty.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "empty.lct'"; expect "info on an empty file exits 1" $?
err=$("$LMCACHE" trace info "$T/missing.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "missing.lct'"; expect "info on a missing file exits 1" $?
"$LMCACHE" trace info >/dev/null 2>&1; rc=$?
[ $rc = 2 ]; expect "info without FILE exits 2" $?

# A truncated tail: a warning, and the counts of what was read.
head -c -3 "$T/cycle.lct" > "$T/cut.lct"
out=$("$LMCACHE" trace info "$T/cut.lct" 2>"$T/cut.err"); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "total_records:              5" && grep -qi "truncated" "$T/cut.err"
expect "info on a truncated tail warns and counts what was read" $?

# --- replay -------------------------------------------------------------------
mkdir -p "$T/r1"
(cd "$T/r1" && "$LMCACHE" trace replay "$T/cycle.lct" $SM --json > out.txt 2> err.txt); rc=$?
expect "replay of a full cycle exits 0" $rc
[ -f "$T/r1/trace_replay_ops.csv" ] && [ -f "$T/r1/trace_replay_summary.json" ]
expect "replay writes the CSV and the JSON in the current directory" $?
head -1 "$T/r1/trace_replay_ops.csv" | grep -q $'^qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms\r$'
expect "CSV header row (CRLF)" $?
grep -q "\"$P.reserve_write\": {" "$T/r1/trace_replay_summary.json" &&
    grep -q "\"$P.finish_write\": {" "$T/r1/trace_replay_summary.json"
expect "JSON ops hold reserve_write and finish_write" $?
grep -q "Trace Replay Result" "$T/r1/out.txt" && grep -q "Records failed:  *0$" "$T/r1/out.txt"
expect "the table is printed with 0 failed" $?
grep -q "Lateness p99 (us):" "$T/r1/out.txt"; expect "the table has a Pacing section" $?

out=$("$LMCACHE" trace replay "$T/store.lct" $SM -q --output-dir "$T/r2" --no-csv 2>/dev/null); rc=$?
[ $rc = 0 ] && ! echo "$out" | grep -q "Trace Replay Result" && [ ! -e "$T/r2/trace_replay_ops.csv" ]
expect "-q hides the table and --no-csv skips the CSV" $?

"$LMCACHE" trace replay "$T/store.lct" $SM -q --output-dir "$T/r3" --jsonl-out "$T/r3/x/rec.jsonl" \
    --format json --output "$T/r3/result.json" 2>/dev/null; rc=$?
[ $rc = 0 ] && [ "$(wc -l < "$T/r3/x/rec.jsonl")" = 2 ] &&
    grep -q '"failed": false' "$T/r3/x/rec.jsonl" && grep -q '"schema": "lmcache.trace_replay_result"' "$T/r3/result.json"
expect "--jsonl-out writes one line per record; --output saves the JSON result" $?

out=$("$LMCACHE" trace replay "$T/store.lct" $SM --verbose --no-csv --output-dir "$T/r4" 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -Eq "^  \[1/2\]  OK +[0-9]+\.[0-9]{3}ms  $P.reserve_write$"
expect "--verbose prints one line per record" $?

out=$("$LMCACHE" trace replay "$T/unknown.lct" $SM --no-csv --output-dir "$T/r5" 2>"$T/r5.err"); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "Records skipped:  *1$" && grep -q "no handler for qualname" "$T/r5.err"
expect "an unknown qualname is skipped with a warning" $?

out=$("$LMCACHE" trace replay "$T/schema1.lct" $SM --no-csv --output-dir "$T/r6" 2>"$T/r6.err"); rc=$?
[ $rc = 0 ] && grep -q "cache_salt may be missing" "$T/r6.err"
expect "a schema 1 trace replays with a cache_salt warning" $?

for bad_scale in 0 -1 nan inf abc; do
    err=$("$LMCACHE" trace replay "$T/store.lct" $SM --time-scale "$bad_scale" 2>&1 >/dev/null); rc=$?
    [ $rc = 2 ] && echo "$err" | grep -q -- "--time-scale"
    expect "--time-scale $bad_scale exits 2 with a message" $?
done

start=$(date +%s%N)
"$LMCACHE" trace replay "$T/store.lct" $SM -q --no-csv --output-dir "$T/r7" --time-scale 4 2>/dev/null; rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ $rc = 0 ] && [ "$elapsed_ms" -ge 190 ]
expect "--time-scale 4 stretches the 50 ms gap to >= 200 ms (took ${elapsed_ms} ms)" $?

# --pace virtual: the recorded schedule in virtual time, no waiting, lateness N/A.
mkdir -p "$T/rv"
start=$(date +%s%N)
(cd "$T/rv" && "$LMCACHE" trace replay "$T/cycle.lct" $SM --pace virtual --time-scale 1000 --json \
    > out.txt 2> err.txt); rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect "--pace virtual replays the cycle and exits 0" $rc
[ "$elapsed_ms" -lt 5000 ]
expect "--pace virtual does not wait out a 130 s schedule at --time-scale 1000 (took ${elapsed_ms} ms)" $?
grep -q "Records failed:  *0$" "$T/rv/out.txt" && grep -q "^Pace:  *virtual$" "$T/rv/out.txt" &&
    grep -q "^Lateness p99 (us):  *N/A$" "$T/rv/out.txt"
expect "the virtual replay's table says Pace virtual and lateness N/A" $?
grep -q '"lateness": null' "$T/rv/trace_replay_summary.json"
expect "the virtual replay's summary JSON has lateness null" $?
# --jsonl-out /dev/stdout: a link to our own stdout, written through it (not refused, not replaced).
"$LMCACHE" trace replay "$T/cycle.lct" $SM --pace virtual --time-scale 1000 -q --no-csv \
    --jsonl-out /dev/stdout > "$T/rv/stdout.jsonl" 2> "$T/rv/stdout.err"
expect "--jsonl-out /dev/stdout exits 0" $?
records=$(sed -n 's/^Records replayed: *\([0-9]*\)$/\1/p' "$T/rv/out.txt")
[ -n "$records" ] && [ "$(wc -l < "$T/rv/stdout.jsonl")" = "$records" ]
expect "--jsonl-out /dev/stdout carries one line per record ($records)" $?
python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert all(r['lateness_us'] is None for r in rows), 'virtual pace: lateness_us is null'
" "$T/rv/stdout.jsonl"
expect "each line parses, with lateness_us null under --pace virtual" $?
[ -L /dev/stdout ]; expect "/dev/stdout is still a link" $?
out=$("$LMCACHE" trace replay "$T/cycle.lct" $SM --pace realtime -q --no-csv --output-dir "$T/rr" 2>&1); rc=$?
expect "--pace realtime is the default's name and exits 0" $rc
err=$("$LMCACHE" trace replay "$T/store.lct" $SM --pace warp 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--pace: unknown pace 'warp' (expected realtime or virtual)"
expect "--pace warp exits 2 naming the choices" $?
"$LMCACHE" trace replay --help | grep -q -- "--pace P  *realtime|virtual"
expect "replay --help lists --pace and its choices" $?

err=$("$LMCACHE" trace replay "$T/store.lct" --eviction-policy LRU 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--l1-size-gb"
expect "replay without --l1-size-gb exits 2 naming it" $?
err=$("$LMCACHE" trace replay "$T/store.lct" $SM --eviction-ratio 1.5 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--eviction-ratio: 1.5 is not in (0, 1]"
expect "a bad storage-manager flag exits 2 naming it" $?
err=$("$LMCACHE" trace replay "$T/badmagic.lct" $SM 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "bad magic"; expect "replay of a bad file exits 1" $?

# --- outcomes, the result schema, digests ---------------------------------------
grep -q "^Outcome digest: [0-9a-f]\{64\}$" "$T/r1/out.txt" && grep -q "^Chunk hit rate:  *100.0% (4 of 4 keys)$" "$T/r1/out.txt" &&
    grep -q "^Recorded hits still hit:  *100.0%$" "$T/r1/out.txt"
expect "the table has the outcome digest, the hit rate and the agreement with the recording" $?
head -1 "$T/r1/trace_replay_outcomes.csv" | grep -q $'^scope,figure,value\r$' &&
    grep -q $'^read_enter,context_ok,1\r$' "$T/r1/trace_replay_outcomes.csv" &&
    grep -q $'^figures,chunk_hit_rate,1.000000\r$' "$T/r1/trace_replay_outcomes.csv"
expect "trace_replay_outcomes.csv holds the counters and figures" $?
mkdir -p "$T/s1"
"$LMCACHE" trace replay "$T/cycle.lct" $SM --json --output-dir "$T/s1" --format json --jsonl-out "$T/s1/r.jsonl" \
    > "$T/s1/stdout.json" 2>/dev/null
expect "replay --format json exits 0" $?
cmp -s "$T/s1/stdout.json" "$T/s1/trace_replay_summary.json"
expect "--format json and trace_replay_summary.json are one text" $?
[ "$(grep -c '"outcome": {"op": ' "$T/s1/r.jsonl")" = 6 ] &&
    grep -q '"index": 4, "t_mono": 0.11, .*"n_keys": 4, .*"outcome": {"op": "read_enter", "found": 4,' "$T/s1/r.jsonl"
expect "JSONL records carry index, t_mono, key count and outcome" $?
d1=$(sed -n 's/.*"outcome_digest": "\([0-9a-f]*\)".*/\1/p' "$T/s1/stdout.json")
d2=$("$LMCACHE" trace replay "$T/cycle.lct" $SM -q --no-csv --output-dir "$T/s1" --format json --output "$T/s1/again.json" 2>/dev/null;
     sed -n 's/.*"outcome_digest": "\([0-9a-f]*\)".*/\1/p' "$T/s1/again.json")
[ -n "$d1" ] && [ "$d1" = "$d2" ]; expect "two replays of one trace give one outcome digest ($d1)" $?

# Every outcome counter and figure of the result is documented.
missing=""
for name in $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
o = r["outcomes"]
names = set(o["figures"]) | set(o["l1"]) | set(o["l2"])
for op in o["ops"].values():
    names |= set(op)
print(" ".join(sorted(names)))' "$T/s1/stdout.json"); do
    grep -q "\`$name\`" "$CLI_DOC" || missing="$missing $name"
done
[ -z "$missing" ]; expect "docs/cli.md documents every outcome figure (missing:$missing)" $?

# --repeat: medians and spreads, and every run's digest.
out=$("$LMCACHE" trace replay "$T/cycle.lct" $SM --repeat 3 --no-csv --output-dir "$T/s1" --json 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "Repeat: median \[min, max\] of 3 runs" &&
    echo "$out" | grep -q "^Run 3 outcome digest: " && echo "$out" | grep -q "^Outcome digests:  *all equal$" &&
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["repeat"]
assert r["runs"] == 3 and len(r["outcome_digests"]) == 3 and r["digests_equal"]
f = r["figures"]["outcomes"]["figures"]["chunk_hit_rate"]
assert f["median"] == f["min"] == f["max"] == 1.0' "$T/s1/trace_replay_summary.json"
expect "--repeat 3 reports medians, spreads and each run's digest" $?
err=$("$LMCACHE" trace replay "$T/cycle.lct" $SM --repeat 0 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--repeat"; expect "--repeat 0 exits 2" $?

# --- trusting the result ---------------------------------------------------------
FS="{\"type\": \"fs\", \"base_path\": \"$T/l2\"}"
"$LMCACHE" trace replay "$T/cycle.lct" $SM --l2-adapter "$FS" -q --no-csv --output-dir "$T/s2" 2>/dev/null
expect "a replay with an fs L2 adapter exits 0" $?
echo keep > "$T/l2/notes.txt"
"$LMCACHE" trace replay "$T/cycle.lct" $SM --l2-adapter "$FS" -q --no-csv --output-dir "$T/s2" 2> "$T/s2.err"; rc=$?
[ $rc = 0 ] && grep -q "base_path '$T/l2' already holds 4 object(s)" "$T/s2.err" && grep -q -- "--clear-l2" "$T/s2.err"
expect "a reused fs base_path gets a warning before the replay" $?
"$LMCACHE" trace replay "$T/cycle.lct" $SM --l2-adapter "$FS" --clear-l2 -q --no-csv --output-dir "$T/s2" 2> "$T/s3.err"; rc=$?
[ $rc = 0 ] && grep -q "removed 4 object(s)" "$T/s3.err" && ! grep -q "already holds" "$T/s3.err" &&
    [ "$(cat "$T/l2/notes.txt")" = keep ]
expect "--clear-l2 removes the adapter's objects and nothing else" $?
err=$("$LMCACHE" trace replay "$T/cycle.lct" $SM --l2-adapter "$FS" --repeat 2 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "needs --clear-l2"; expect "--repeat with an fs L2 needs --clear-l2" $?

out=$("$LMCACHE" trace replay "$T/config.lct" $SM --no-csv --output-dir "$T/s2" 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^Config digest:  *MISMATCH (rec=00112233, run=" &&
    echo "$out" | grep -q "^Config differs:  *l1_size_gb$" && echo "$out" | grep -q "^Config differs:  *l1_manager_config$"
expect "a config mismatch names the fields that differ" $?
out=$("$LMCACHE" trace info --config "$T/config.lct"); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q '^        "base_path": "/recorded"$'
expect "trace info --config prints the recorded config" $?
err=$("$LMCACHE" trace info --config "$T/store.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "has no recorded StorageManager config"
expect "trace info --config of a trace without one exits 1" $?

# --- usability ---------------------------------------------------------------------
touch "$T/afile"
err=$("$LMCACHE" trace replay "$T/store.lct" $SM --output-dir "$T/afile/out" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "cannot create --output-dir '$T/afile/out'" && ! echo "$err" | grep -q "StorageManager ready"
expect "an unwritable --output-dir fails before any record is replayed" $?
err=$("$LMCACHE" trace replay "$T/store.lct" $SM --no-csv --output "$T/none/result.txt" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "cannot write --output '$T/none/result.txt'" && ! echo "$err" | grep -q "trace replay: file="
expect "an --output that cannot be written fails before the replay" $?
err=$("$LMCACHE" trace replay "$T/store.lct" $SM -q --no-csv --output-dir "$T/s4" 2>&1 >/dev/null)
! echo "$err" | grep -q "REPLAY ENVIRONMENT MISMATCH" && ! echo "$err" | grep -q "\[1/2\]"
expect "-q hides the banner; without a terminal there are no per-record log lines" $?

mkdir -p "$T/int"
"$LMCACHE" trace replay "$T/long.lct" $SM --json --output-dir "$T/int" > "$T/int/out.txt" 2> "$T/int/err.txt" &
pid=$!
sleep 2
kill -INT "$pid"
wait "$pid"; rc=$?
[ $rc = 130 ] && grep -q "interrupted: replayed [0-9]* of 2400 records" "$T/int/err.txt" &&
    grep -q '"status": "interrupted"' "$T/int/trace_replay_summary.json" &&
    grep -q "^note: interrupted (Ctrl-C) after [0-9]* records" "$T/int/out.txt" &&
    [ -f "$T/int/trace_replay_ops.csv" ]
expect "Ctrl-C writes the partial results, says so and exits 130 (rc $rc)" $?

# --- record -----------------------------------------------------------------
out=$("$LMCACHE" trace record 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "lmcache server" && echo "$out" | grep -q -- "--trace-level storage"
expect "record exits 2 and points at the server" $?

e2e_report test_trace_cli
