#!/usr/bin/env bash
# `lmcache trace dump` and `lmcache trace slice` end to end: dump's filters
# on a fixture whose answer is known, escaping, --limit, JSONL; slices of
# the fixture and of a trace recorded by `lmcache server` under `lmcache
# bench server` (Mooncake workload), replayed with 0 failed records.
# Usage: test_trace_tools.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"
# expect_eq description got want
expect_eq() { [ "$2" = "$3" ]; expect "$1 (got '$2', want '$3')" $?; }

for k in timeline ctrl cycle badmagic empty; do
    "$TOOLS/make_trace" "$k" "$T/$k.lct" || { echo "cannot make fixture $k"; exit 1; }
done
SM="--l1-size-gb 0.01 --eviction-policy LRU"
P=lmcache.v1.distributed.storage_manager.StorageManager
# The first column (index) of each record line of a dump, space-separated.
indices() { "$LMCACHE" trace dump "$@" --no-header | awk '{ printf "%s ", $1 }'; }

# --- dump: the fixture (tests/tools/make_trace.c timeline(): 12 records, keys A B C) ---
out=$("$LMCACHE" trace dump "$T/timeline.lct"); rc=$?
expect "dump exits 0" $rc
expect_eq "dump prints 5 header lines" "$(echo "$out" | grep -c '^#')" 5
expect_eq "dump prints 12 records and the dropped marker" "$(echo "$out" | grep -vc '^#')" 13
echo "$out" | grep -q "^# trace $T/timeline.lct$"; expect "the header names the file" $?
echo "$out" | grep -q "^# format_version 1  level storage  trace_schema_version 2$"
expect "the header has the versions" $?
echo "$out" | grep -q "^# t_mono_start 1000.000000  t_wall_start 1767225600.000000 (2026-01-01T00:00:00.000000Z)$"
expect "the header has the start times" $?
echo "$out" | grep -q "^# sm_config_digest (none)$"; expect "the header has the config digest" $?
echo "$out" | grep -Eq "^       1      0\.000000 reserve_write +2 keys=2\[aa112233\.\.\] layout_desc=\[2,4,256,64\]:bfloat16 mode=new$"
expect "a reserve_write line: index, t_mono, op, key count, abbreviated args" $?
echo "$out" | grep -Eq "^       3      1\.000000 submit_prefetch_task +1 keys=1\[aa112233\.\.\] .* extra_count=0 external_request_id=req-1 policy=PREFIX$"
expect "a submit_prefetch_task line shows extra_count, the request id and the policy" $?
echo "$out" | grep -Eq "^       -      3\.500000 \[dropped_records\] +0 dropped_count=2$"
expect "the dropped-records marker is shown as such" $?

expect_eq "--from 1 --to 3 selects records 3-8" "$(indices "$T/timeline.lct" --from 1 --to 3)" "3 4 5 6 7 8 "
expect_eq "--from is inclusive, --to exclusive" "$(indices "$T/timeline.lct" --from 2.25 --to 3.1)" "8 9 "
expect_eq "--qualname in short form" "$(indices "$T/timeline.lct" --qualname finish_write)" "2 8 "
expect_eq "--qualname repeated, short and full form" \
    "$(indices "$T/timeline.lct" --qualname reserve_write --qualname "$P.finish_write")" "1 2 7 8 "
expect_eq "--qualname of a marker" \
    "$(indices "$T/timeline.lct" --qualname lmcache.trace.recorder.dropped_records)" "- "
expect_eq "--key selects the records touching C" "$(indices "$T/timeline.lct" --key cc112233)" "7 8 9 10 11 12 "
expect_eq "--key is case-insensitive and combines with --from" \
    "$(indices "$T/timeline.lct" --key BB112233 --from 2)" "9 10 11 12 "
expect_eq "--key with a longer prefix" \
    "$(indices "$T/timeline.lct" --key aa11223344556677 --to 1.05)" "1 2 3 "
expect_eq "--limit stops after N records" "$(indices "$T/timeline.lct" --limit 3)" "1 2 3 "
expect_eq "--limit counts the records the filters select" \
    "$(indices "$T/timeline.lct" --qualname finish_read_prefetched --limit 1)" "6 "

# JSONL: every line parses, the header first, every record fully decoded.
"$LMCACHE" trace dump "$T/timeline.lct" --format jsonl > "$T/tl.jsonl"; rc=$?
expect "dump --format jsonl exits 0" $rc
expect_eq "jsonl has the header and 13 record lines" "$(wc -l < "$T/tl.jsonl")" 14
bad=0
while IFS= read -r line; do
    printf '%s\n' "$line" | python3 -m json.tool > /dev/null 2>&1 || bad=$((bad + 1))
done < "$T/tl.jsonl"
expect_eq "every jsonl line parses with python3 -m json.tool" $bad 0
python3 - "$T/tl.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
h, recs = lines[0], lines[1:]
assert h["type"] == "header" and h["level"] == "storage" and h["trace_schema_version"] == 2, h
assert [r["index"] for r in recs if r["type"] == "record"] == list(range(1, 13))
assert recs[-1]["type"] == "marker" and recs[-1]["marker"] == "dropped_records"
assert recs[-1]["args"] == {"dropped_count": 2}
k = recs[8]["args"]["keys"][2]
assert set(k) == {"chunk_hash", "model_name", "kv_rank", "object_group_id", "cache_salt"}, k
assert k["chunk_hash"].startswith("cc112233") and len(k["chunk_hash"]) == 64, k
assert k["model_name"] == "meta-llama/Llama-3.1-8B" and k["kv_rank"] == 0x01000100, k
assert recs[0]["args"]["layout_desc"] == {"shapes": [[2, 4, 256, 64]], "dtypes": ["torch.bfloat16"]}
assert recs[2]["args"]["external_request_id"] == "req-1" and recs[2]["args"]["policy"] == "PREFIX"
assert recs[2]["op"] == "submit_prefetch_task" and recs[2]["n_keys"] == 1
EOF
expect "jsonl records carry every argument and every key field" $?
expect_eq "jsonl --no-header and the filters" \
    "$("$LMCACHE" trace dump "$T/timeline.lct" --format jsonl --no-header --key cc112233 | wc -l)" 6

# Control characters are escaped: nothing raw reaches the terminal, no line is forged.
out=$("$LMCACHE" trace dump "$T/ctrl.lct" --no-header); rc=$?
expect "dump of control characters exits 0" $rc
expect_eq "no raw ESC, BEL or other control byte is printed" \
    "$(printf '%s' "$out" | LC_ALL=C tr -d '\n' | LC_ALL=C grep -c '[[:cntrl:]]')" 0
expect_eq "a newline in a qualname does not forge a line" "$(echo "$out" | wc -l)" 2
echo "$out" | grep -qF 'lmcache.evil\x1b[31m\nforged\x201\x20line\x07'
expect "a foreign qualname is printed in full with its escapes" $?
echo "$out" | grep -qF 'external_request_id="req\x1b]0;title\x07\n"'
expect "a request id with control characters is quoted and escaped" $?
"$LMCACHE" trace dump "$T/ctrl.lct" --format jsonl --no-header > "$T/ctrl.jsonl"
python3 - "$T/ctrl.jsonl" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs[0]["qualname"] == "lmcache.evil\x1b[31m\nforged 1 line\x07", recs[0]["qualname"]
assert recs[0]["op"] is None
assert recs[1]["args"]["external_request_id"] == "req\x1b]0;title\x07\n"
assert recs[1]["args"]["keys"][0]["model_name"] == "model\x1b[2J"
EOF
expect "jsonl carries the control characters as JSON escapes" $?
LC_ALL=C grep -c $'\x1b' "$T/ctrl.jsonl" > /dev/null; expect_eq "jsonl holds no raw ESC" $? 1

# Usage errors exit 2, bad files 1.
for args in "" "--limit 0" "--limit x" "--format xml" "--from abc" "--from -1" "--from 2 --to 1" \
    "--key aa11223" "--key zz112233" "--bogus" "--qualname"; do
    # shellcheck disable=SC2086
    if [ -z "$args" ]; then "$LMCACHE" trace dump > /dev/null 2>&1; else
        "$LMCACHE" trace dump "$T/timeline.lct" $args > /dev/null 2>&1; fi
    expect_eq "dump ${args:-without FILE} exits 2" $? 2
done
err=$("$LMCACHE" trace dump "$T/timeline.lct" --key aa11223 2>&1)
echo "$err" | grep -q "at least 8 hex digits"; expect "a short --key says how long it must be" $?
err=$("$LMCACHE" trace dump "$T/timeline.lct" --qualname finsh_write 2>&1 >/dev/null)
echo "$err" | grep -q "warning: --qualname 'finsh_write' is not a StorageManager operation"
expect "a misspelt short qualname gets a warning" $?
err=$("$LMCACHE" trace dump "$T/badmagic.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "bad magic"; expect "dump of a bad magic exits 1 naming it" $?
"$LMCACHE" trace dump "$T/missing.lct" > /dev/null 2>&1; expect_eq "dump of a missing file exits 1" $? 1
"$LMCACHE" trace dump "$T/empty.lct" > /dev/null 2>&1; expect_eq "dump of an empty file exits 1" $? 1
head -c -3 "$T/timeline.lct" > "$T/cut.lct"
out=$("$LMCACHE" trace dump "$T/cut.lct" --no-header 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | tail -1 | grep -q "\[truncated\]"; expect "a cut tail is shown as [truncated]" $?
"$LMCACHE" trace dump --help | grep -q -- "--key HEX"; expect "dump --help lists the flags" $?
"$LMCACHE" trace --help | grep -q "^  dump "; expect "trace --help lists dump" $?

# --- slice: the fixture -------------------------------------------------------
cp "$T/timeline.lct" "$T/timeline.orig"
out=$("$LMCACHE" trace slice "$T/timeline.lct" --from 1 --to 3 -o "$T/s.lct"); rc=$?
expect "slice exits 0" $rc
expect_eq "slice says what it wrote" "$out" "wrote 6 of 12 records to $T/s.lct"
expect_eq "the slice file is 0600" "$(stat -c %a "$T/s.lct")" 600
info=$("$LMCACHE" trace info "$T/s.lct")
expect_eq "trace info counts the window's records" \
    "$(echo "$info" | sed -n 's/^  total_records: *//p')" 6
expect_eq "trace info: the slice marker is not an operation" "$(echo "$info" | grep -c 'lmcache.trace.slice')" 0
out=$("$LMCACHE" trace dump "$T/s.lct")
echo "$out" | grep -q "^# t_mono_start 1001.000000  t_wall_start 1767225601.000000 "
expect "the slice's header starts at the window" $?
expect_eq "the slice's records keep their order, t_mono rebased" \
    "$(echo "$out" | grep -v '^#' | awk '{ printf "%s@%s ", $1, $2 }')" \
    "1@0.000000 2@0.100000 3@0.200000 4@0.300000 5@1.000000 6@1.250000 -@1.250000 "
echo "$out" | tail -1 | grep -Eq "\[slice\] +0 source=timeline.lct source_sha256=$(sha256sum "$T/timeline.lct" | cut -c1-64) from=1.0 to=3.0 qualnames=\[\] max_records=None records=6 source_records=12 source_malformed=0 source_dropped=2$"
expect "the slice marker names the source, its digest, the window and the counts" $?
cmp -s "$T/timeline.lct" "$T/timeline.orig"; expect "the source is unchanged" $?
"$LMCACHE" trace replay "$T/s.lct" $SM --no-csv --output-dir "$T/r1" > "$T/r1.out" 2> "$T/r1.err"
expect "the slice replays" $?
grep -q "Records replayed:  *6$" "$T/r1.out" && grep -q "Records skipped:  *0$" "$T/r1.out" &&
    grep -q "Records failed:  *0$" "$T/r1.out"
expect "the slice replays 6 records, none skipped (the marker is not), none failed" $?

out=$("$LMCACHE" trace slice "$T/timeline.lct" --qualname finish_write --qualname read_prefetched_results.__enter__ \
    --max-records 3 -o "$T/q.lct")
expect_eq "--qualname and --max-records narrow the slice" "$out" "wrote 3 of 12 records to $T/q.lct"
expect_eq "the narrowed slice holds the first three such records" \
    "$("$LMCACHE" trace dump "$T/q.lct" --no-header | awk '$1 != "-" { printf "%s ", $3 }')" \
    "finish_write read_prefetched_results.__enter__ finish_write "
"$LMCACHE" trace slice "$T/cycle.lct" -o "$T/whole.lct" > /dev/null
cmp -s -n "$(stat -c %s "$T/cycle.lct")" "$T/cycle.lct" "$T/whole.lct"
expect "a slice of everything starts with the source's exact bytes (re-encoding is byte-identical)" $?

err=$("$LMCACHE" trace slice "$T/timeline.lct" -o "$T/timeline.lct" 2>&1); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "is the input file"; expect "slice refuses to overwrite its input" $?
ln -s "$T/timeline.lct" "$T/link.lct"
"$LMCACHE" trace slice "$T/timeline.lct" -o "$T/link.lct" > /dev/null 2>&1
expect_eq "slice refuses its input through a symlink" $? 1
cmp -s "$T/timeline.lct" "$T/timeline.orig"; expect "the source is still unchanged" $?
for args in "" "-o" "--from 1 --to 3" "--max-records 0 -o $T/x.lct" "--to 0 -o $T/x.lct" "--key aa112233 -o $T/x.lct"; do
    # shellcheck disable=SC2086
    "$LMCACHE" trace slice "$T/timeline.lct" $args > /dev/null 2>&1
    expect_eq "slice ${args:-without -o} exits 2" $? 2
done
"$LMCACHE" trace slice "$T/badmagic.lct" -o "$T/x.lct" > /dev/null 2>&1
expect_eq "slice of a bad file exits 1" $? 1
[ ! -e "$T/x.lct" ]; expect "a failed slice writes nothing" $?
[ -z "$(find "$T" -name '*.lct.??????')" ]; expect "no temporary file is left behind" $?
# An output that is not a regular file is written as it is, never replaced by one.
mkfifo "$T/pipe.lct"
cat "$T/pipe.lct" > "$T/from-pipe.lct" &
reader=$!
out=$("$LMCACHE" trace slice "$T/timeline.lct" --from 1 --to 3 -o "$T/pipe.lct"); rc=$?
wait "$reader"
expect "slice into a FIFO exits 0" $rc
[ -p "$T/pipe.lct" ]; expect "the FIFO is still a FIFO" $?
cmp -s "$T/from-pipe.lct" "$T/s.lct"; expect "the FIFO carried the same bytes as the file" $?
if [ -c /dev/full ]; then
    err=$("$LMCACHE" trace slice "$T/timeline.lct" -o /dev/full 2>&1); rc=$?
    [ $rc = 1 ] && echo "$err" | grep -q "cannot write '/dev/full': No space left on device"
    expect "slice into /dev/full fails and says why" $?
    [ -c /dev/full ]; expect "/dev/full is still a device" $?
fi

# --- slice: a trace recorded by lmcache server ----------------------------------
[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
record_mooncake "$T/rec.lct" 100 --l1-size-gb 0.03 --eviction-policy LRU

dur=$("$LMCACHE" trace info "$T/rec.lct" | sed -n 's/^  duration: *\([0-9.]*\)s$/\1/p')
total=$("$LMCACHE" trace info "$T/rec.lct" | sed -n 's/^  total_records: *//p')
FROM=$(awk -v d="$dur" 'BEGIN { printf "%.6f", d / 4 }')
TO=$(awk -v d="$dur" 'BEGIN { printf "%.6f", d * 3 / 4 }')
want=$("$LMCACHE" trace dump "$T/rec.lct" --from "$FROM" --to "$TO" --no-header | awk '$1 != "-"' | wc -l)
[ "${want:-0}" -gt 10 ] && [ "$want" -lt "${total:-0}" ]
expect "the window [$FROM, $TO) holds part of the recording ($want of $total records)" $?
out=$("$LMCACHE" trace slice "$T/rec.lct" --from "$FROM" --to "$TO" -o "$T/rec-slice.lct"); rc=$?
expect "slice of the recording exits 0" $rc
expect_eq "slice writes the window's records" "$out" "wrote $want of $total records to $T/rec-slice.lct"
expect_eq "trace info of the slice counts the window's records" \
    "$("$LMCACHE" trace info "$T/rec-slice.lct" | sed -n 's/^  total_records: *//p')" "$want"
expect_eq "trace dump of the slice lists the window's records" \
    "$("$LMCACHE" trace dump "$T/rec-slice.lct" --no-header | awk '$1 != "-"' | wc -l)" "$want"
expect_eq "the slice keeps the recorded config digest" \
    "$("$LMCACHE" trace info "$T/rec-slice.lct" | grep sm_config_digest)" \
    "$("$LMCACHE" trace info "$T/rec.lct" | grep sm_config_digest)"
"$LMCACHE" trace replay "$T/rec-slice.lct" --l1-size-gb 0.03 --eviction-policy LRU --no-csv \
    --output-dir "$T/r2" > "$T/r2.out" 2> "$T/r2.err"
expect "the recorded slice replays (exit 0)" $?
grep -q "Records failed:  *0$" "$T/r2.out"; expect "the recorded slice replays with 0 failed records" $?
grep -q "Records replayed:  *$want$" "$T/r2.out" && grep -q "Records skipped:  *0$" "$T/r2.out"
expect "the recorded slice replays all $want records and skips none" $?
grep -q "Config digest:  *match" "$T/r2.out"; expect "the replay matches the slice's config digest" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
