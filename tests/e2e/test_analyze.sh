#!/usr/bin/env bash
# `lmcache trace analyze` and `trace info`'s key summary end to end, as a
# user runs them: record a Mooncake workload through `lmcache server` and
# `lmcache bench server`, analyze the trace, and check the figures against
# each other (requests = submit_prefetch_task records in `trace info`,
# footprint = unique keys x object size, the recorded hit rate = the
# bench's own), the JSON (python3 -m json.tool, then its fields), the CSV
# files, and the HTML report rendered in headless Chromium (a screenshot
# that is not blank, the labels in the file and in the DOM). The Chromium
# part is skipped, saying so, only when Chromium is not installed
# (scripts/install-deps installs it).
# Usage: test_analyze.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"
# The value at a JSON path ("workload/requests") in a file.
jget() { python3 -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("/"): v=v[int(k)] if isinstance(v,list) else v[k]
print(v)' "$1" "$2"; }

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (scripts/install-deps)"; exit 1; }
P=lmcache.v1.distributed.storage_manager.StorageManager

# --- 1. record a workload ------------------------------------------------------
PORT=$(free_port)
LMCACHE_LOG_LEVEL=INFO "$LMCACHE" server --port "$PORT" --max-workers 2 --l1-size-gb 0.05 \
    --eviction-policy LRU --trace-level storage --trace-output "$T/rec.lct" 2> "$T/server.log" &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 1 100); do
    grep -q "listening on" "$T/server.log" 2>/dev/null && break
    sleep 0.1
done
grep -q "listening on" "$T/server.log"; expect "the server starts" $?
"$LMCACHE" bench server --port "$PORT" --trace "$MOONCAKE" --max-requests 300 --time-scale 0.01 \
    --concurrency 2 --bytes-per-token 16 --json > "$T/bench.json" 2> "$T/bench.err"
expect "bench server records a workload" $?
kill -TERM "$SERVER"
wait "$SERVER"
expect "the server stops cleanly" $?

# --- 2. trace info: counts and the key summary ---------------------------------
"$LMCACHE" trace info "$T/rec.lct" > "$T/info.txt"
expect "trace info reads the recording" $?
lookups=$(sed -n "s/^    $P\.submit_prefetch_task: \([0-9]*\)$/\1/p" "$T/info.txt")
[ -n "$lookups" ] && [ "$lookups" -gt 0 ]; expect "the recording has lookups ($lookups)" $?
grep -q "^  unique_keys:                [0-9][0-9]*$" "$T/info.txt"; expect "trace info prints unique_keys" $?
grep -q "^  footprint:                  [0-9][0-9]* bytes (" "$T/info.txt"; expect "trace info prints the footprint" $?
"$LMCACHE" trace info --format json "$T/rec.lct" > "$T/info.json"
expect "trace info --format json exits 0" $?
python3 -m json.tool "$T/info.json" > /dev/null; expect "trace info's JSON parses" $?
[ "$(jget "$T/info.json" schema)" = lmcache.trace_info ]; expect "trace info's JSON names its schema" $?
[ "$(jget "$T/info.json" "ops/$P.submit_prefetch_task")" = "$lookups" ]
expect "trace info's JSON has the same per-op counts" $?

# --- 3. trace analyze: the figures agree -----------------------------------------
"$LMCACHE" trace analyze "$T/rec.lct" --sizes 0.01,0.05,1 > "$T/analyze.txt" 2> "$T/analyze.err"
_st=$?; expect "trace analyze exits 0: $(head -3 "$T/analyze.err")" $_st
for section in "Workload" "Recorded hit rate" "Per model / cache_salt" \
    "LRU miss-ratio curve (chunk hit rate against L1 capacity; exact)" \
    "Reuse distance (distinct keys since the previous access of the key)"; do
    grep -qF "$section" "$T/analyze.txt"; expect "the table has the section '$section'" $?
done
# The digest a replay result names the trace by (trace.digest): the two tools agree.
"$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb 0.05 --eviction-policy LRU --pace virtual \
    --output-dir "$T" --no-csv -q --format json --output "$T/replay.json" 2> "$T/replay.err"
digest=$(jget "$T/replay.json" trace/digest)
[ ${#digest} = 32 ] && grep -q "^  digest:                     $digest$" "$T/analyze.txt"
expect "the table names the trace by the replay result's digest" $?

"$LMCACHE" trace analyze "$T/rec.lct" --sizes 0.01,0.05,1 --format json --output "$T/saved.json" \
    --csv "$T/csv" --html "$T/report.html" > "$T/analyze.json"
expect "trace analyze --format json --csv --html exits 0" $?
python3 -m json.tool "$T/analyze.json" > /dev/null; expect "the JSON parses (python3 -m json.tool)" $?
cmp -s "$T/analyze.json" "$T/saved.json"; expect "--output saves the same JSON" $?
[ "$(jget "$T/analyze.json" schema)" = lmcache.trace_analyze ] &&
    [ "$(jget "$T/analyze.json" schema_version)" = 1 ]
expect "the JSON names its schema and version" $?
[ "$(jget "$T/analyze.json" trace/digest)" = "$digest" ]
expect "the JSON carries the trace's digest" $?
[ "$(jget "$T/analyze.json" workload/requests)" = "$lookups" ]
expect "requests = submit_prefetch_task records in trace info ($lookups)" $?
[ "$(jget "$T/analyze.json" workload/unique_keys)" = "$(jget "$T/info.json" keys/unique_keys)" ] &&
    [ "$(jget "$T/analyze.json" workload/footprint_bytes)" = "$(jget "$T/info.json" keys/footprint_bytes)" ]
expect "trace info and trace analyze agree on unique keys and footprint" $?
python3 - "$T/analyze.json" "$T/bench.json" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
w = a["workload"]; m = a["mrc"]
assert w["object_bytes_min"] == w["object_bytes_max"] == 256 * 16, w
assert w["footprint_bytes"] == w["unique_keys"] * w["object_bytes_min"], "footprint != unique x size"
assert w["keys_looked_up"] >= w["unique_keys"] > 0
assert abs(w["recorded_hit_rate"] - b["hit_rate"]) < 1e-9, (w["recorded_hit_rate"], b["hit_rate"])
assert m["exact"] and m["accesses"] == w["keys_looked_up"] and m["cold_misses"] == w["unique_keys"]
pts = m["points"]
assert all(p["hit_rate"] <= q["hit_rate"] for p, q in zip(pts, pts[1:])), "the curve falls"
assert abs(pts[-1]["hit_rate"] - m["max_hit_rate"]) < 1e-12
assert abs(m["max_hit_rate"] - (1 - w["unique_keys"] / w["keys_looked_up"])) < 1e-12
req = sorted(p["capacity_gib"] for p in pts if p["requested"])
assert len(req) == 3 and all(abs(x - y) < 1e-9 for x, y in zip(req, [0.01, 0.05, 1.0])), req
assert sum(g["keys_looked_up"] for g in a["groups"]) == w["keys_looked_up"]
assert sum(x["accesses"] for x in a["reuse"]["keys"]) + a["reuse"]["cold"] == m["accesses"]
assert abs(sum(x["requests_per_s"] for x in a["rates"]["buckets"]) * a["rates"]["bucket_s"] - w["requests"]) < 1e-6
EOF
expect "the figures are consistent (footprint, hit rate = the bench's, curve, reuse, rates)" $?
for f in mrc reuse rates; do [ -s "$T/csv/$f.csv" ]; expect "--csv writes $f.csv" $?; done
head -1 "$T/csv/mrc.csv" | grep -qx "capacity_bytes,capacity_gib,hit_rate,error_bound,requested"
expect "mrc.csv has its header" $?
[ "$(($(wc -l < "$T/csv/mrc.csv") - 1))" = "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["mrc"]["points"]))' "$T/analyze.json")" ]
expect "mrc.csv has a row per point of the curve" $?

# Sampled: the same counts, estimates flagged, bounds given.
"$LMCACHE" trace analyze "$T/rec.lct" --sample 0.5 --format json > "$T/sampled.json"
expect "--sample 0.5 exits 0" $?
python3 - "$T/sampled.json" "$T/analyze.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))
assert not s["analysis"]["exact"] and s["workload"]["estimated"]
assert s["workload"]["keys_looked_up"] == e["workload"]["keys_looked_up"]
assert s["mrc"]["accesses"] < e["mrc"]["accesses"]
assert any(p["error_bound"] > 0 for p in s["mrc"]["points"])
EOF
expect "a sampled analysis keeps the exact counts and bounds its curve" $?

# --- 3b. the curve against replays (issue 16's done-when) ---------------------------
# At three L1 sizes S (fractions of the footprint), the analysis's LRU hit rate at S
# is within 0.03 of an engine-mode virtual-time replay with --eviction-policy LRU
# --l1-size-gb S: the curve answers "how much L1" as a replay of each size would.
fp=$(jget "$T/analyze.json" workload/footprint_bytes)
sizes=$(python3 -c "import sys; f=int(sys.argv[1]); print(','.join('%.6f' % max(f*x/2**30, 0.001) for x in (0.15, 0.4, 0.8)))" "$fp")
"$LMCACHE" trace analyze "$T/rec.lct" --sizes "$sizes" --format json > "$T/curve.json"
expect "trace analyze --sizes $sizes" $?
for s in ${sizes//,/ }; do
    "$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb "$s" --eviction-policy LRU --mode engine \
        --pace virtual --output-dir "$T" --no-csv -q --format json --output "$T/engine-$s.json" \
        2> "$T/engine.err"
    _st=$?; expect "the engine-mode replay at $s GiB: $(head -2 "$T/engine.err")" $_st
    python3 - "$T/curve.json" "$T/engine-$s.json" "$s" <<'EOF2'
import json, sys
curve = json.load(open(sys.argv[1]))
eng = json.load(open(sys.argv[2]))["outcomes"]["figures"]["engine_hit_rate"]
want = int(float(sys.argv[3]) * 2**30)
pt = min((p for p in curve["mrc"]["points"] if p["requested"]),
         key=lambda p: abs(p["capacity_bytes"] - want))
print("  L1 %s GiB: analyze LRU %.4f, engine replay %.4f" % (sys.argv[3], pt["hit_rate"], eng))
sys.exit(0 if abs(pt["hit_rate"] - eng) <= 0.03 else 1)
EOF2
    expect "the curve at $s GiB is within 0.03 of the engine replay" $?
done

# --- 4. the HTML report ------------------------------------------------------------
for label in "Trace analysis" "Hit rate against L1 capacity" "chunk hit rate" "L1 capacity (log scale" \
    "Request rate over time" "Key rate over time" "Reuse distance in keys" "Per model and cache_salt" \
    "$digest"; do
    grep -qF "$label" "$T/report.html"; expect "the report has '$label'" $?
done
! grep -qiE "<script|<link|@import|src=" "$T/report.html"
expect "the report loads nothing and runs nothing" $?
if chromium_render "$T/report.html" "$T/report.png" "$T/dom.html"; then
    for label in "Hit rate against L1 capacity" "LRU, exact" "recorded hit rate" "requested sizes"; do
        grep -qF "$label" "$T/dom.html"; expect "the DOM has '$label'" $?
    done
    [ "$(grep -o '<svg class="chart"' "$T/dom.html" | wc -l)" = 5 ]; expect "the DOM has its five charts" $?
    grep -q '<figure id="mrc">' "$T/dom.html"; expect "the DOM has the curve's figure" $?
fi

# --- 5. errors and help ------------------------------------------------------------
"$LMCACHE" trace analyze --help | grep -q "^usage: lmcache trace analyze"; expect "--help prints the usage" $?
err=$("$LMCACHE" trace analyze "$T/missing.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q "missing.lct'"; expect "a missing file exits 1 naming it" $?
err=$("$LMCACHE" trace analyze "$T/rec.lct" --sample 2 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--sample: '2'"; expect "--sample 2 exits 2" $?
err=$("$LMCACHE" trace analyze "$T/rec.lct" --sizes 1,,2 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--sizes"; expect "--sizes 1,,2 exits 2" $?
err=$("$LMCACHE" trace analyze "$T/rec.lct" --sizes -1 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q -- "--sizes: '-1'"; expect "--sizes -1 exits 2" $?
err=$("$LMCACHE" trace analyze "$T/rec.lct" --bogus 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "unknown option '--bogus'"; expect "an unknown option exits 2" $?
err=$("$LMCACHE" trace analyze 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "a trace FILE is required"; expect "no FILE exits 2" $?
err=$("$LMCACHE" trace analyze "$T/rec.lct" -q --html "$T/nodir/r.html" 2>&1); rc=$?
[ $rc = 1 ] && echo "$err" | grep -q -- "cannot write --html '$T/nodir/r.html'"
expect "an --html path that cannot be written exits 1 naming it" $?
err=$("$LMCACHE" trace info --format yaml "$T/rec.lct" 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "'yaml' is not one of terminal, json"; expect "trace info --format yaml exits 2" $?

e2e_report test_analyze
