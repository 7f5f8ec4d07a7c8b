#!/usr/bin/env bash
# `lmcache trace replay --html PATH` end to end: record a Mooncake workload
# through `lmcache server` and `lmcache bench server`, replay it with --html
# (virtual time, both modes; realtime once, for the lateness chart), and
# check the report: its sections, labels and units, the trace and config in
# its header, the outcome digest of the result JSON, nothing loaded from
# anywhere, and a Chromium screenshot that is not blank. The result JSON is
# the same with and without --html. A bad --html path fails before the
# replay starts, naming the flag.
# Usage: test_replay_report.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (scripts/install-deps)"; exit 1; }
record_mooncake "$T/rec.lct" 300 --l1-size-gb 0.05 --eviction-policy LRU
SM="--l1-size-gb 0.03 --eviction-policy LRU"

# --- the report of an engine-mode virtual replay --------------------------------------------
expect_rc "replay --mode engine --pace virtual --html exits 0" 0 \
    "$LMCACHE" trace replay "$T/rec.lct" $SM --mode engine --pace virtual --output-dir "$T" \
    --no-csv -q --format json --output "$T/engine.json" --html "$T/engine.html"
grep -q "HTML report written to $T/engine.html" "$T/err"; expect "the log names the report" $?
R="$T/engine.html"
for label in "<title>Trace replay</title>" "rec.lct" "$(json_get "$T/engine.json" 'r["trace"]["digest"]')" \
    "$(json_get "$T/engine.json" 'r["outcome_digest"]')" "mode engine, pace virtual, time scale 1" \
    "config digest" "--eviction-policy LRU" "records" "span" \
    "Latency per operation (CDF)" "latency per call (log scale)" "submit_prefetch_task (" \
    "retrieve (" "store (" "fraction of values at or below" " us</text>" \
    "Hit rate over time" "share of looked-up keys" "engine hit rate" "chunk hit rate (L1 + L2)" \
    "L1 hit rate" "L2 hit rate" "recorded hit rate" \
    "L1 usage over time" "L1 used / capacity" "peak in bucket" \
    "recorded time since the trace started (t_mono)" \
    "no lateness to show" \
    "<caption>Overall</caption>" "<caption>Outcomes</caption>" "<caption>Memory and L2</caption>" \
    "<caption>Per-Op Latency (ms)</caption>" "<caption>Pacing</caption>" "Engine hit rate" \
    "Outcome digest"; do
    grep -qF -- "$label" "$R"; expect "the engine report has '$label'" $?
done
[ "$(grep -o '<svg class="chart"' "$R" | wc -l)" = 3 ]
expect "the virtual-time report has three charts (latency, hit rate, L1 usage)" $?
! grep -qiE "<script|<link|@import|src=|url\((https?:|//)" "$R"
expect "the report loads nothing and runs nothing" $?
python3 - "$R" "$T/engine.json" <<'PYEOF'
import json, re, sys
html = open(sys.argv[1]).read(); r = json.load(open(sys.argv[2]))
f = r["outcomes"]["figures"]
# The table's hit rate row is the result's, written as the terminal table writes it.
want = "%.1f%%" % (100 * f["engine_hit_rate"])
assert re.search(r"<td>Engine hit rate</td><td class=\"num\">%s " % re.escape(want), html), want
PYEOF
expect "the report's table shows the result's engine hit rate" $?

# The result is the same with and without --html (the sweep embeds it).
"$LMCACHE" trace replay "$T/rec.lct" $SM --mode engine --pace virtual --output-dir "$T" --no-csv -q \
    --format json --output "$T/plain.json" 2> /dev/null
expect "the replay without --html exits 0" $?
python3 - "$T/plain.json" "$T/engine.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for r in (a, b):
    for k in ("started_at", "started_at_unix_s", "duration_s", "ops", "lateness", "outputs"):
        r.pop(k, None)
assert a == b, [k for k in a if a.get(k) != b.get(k)]
PYEOF
expect "--html changes nothing in the result JSON (timings aside)" $?

# --- mode calls in realtime: the lateness chart -----------------------------------------------
expect_rc "replay --time-scale 0.5 --html exits 0" 0 \
    "$LMCACHE" trace replay "$T/rec.lct" $SM --time-scale 0.5 --output-dir "$T" --no-csv -q \
    --html "$T/calls.html"
for label in "Lateness over time" "mean lateness" "max lateness" "mode calls, pace realtime, time scale 0.5" \
    "reserve_write (" "read_prefetched_results.enter (" "chunk hit rate (L1 + L2)"; do
    grep -qF -- "$label" "$T/calls.html"; expect "the realtime report has '$label'" $?
done
! grep -qF "engine hit rate" "$T/calls.html"; expect "mode calls shows no engine hit rate" $?
[ "$(grep -o '<svg class="chart"' "$T/calls.html" | wc -l)" = 4 ]
expect "the realtime report has four charts" $?

# --- rendered ---------------------------------------------------------------------------------
if chromium_render "$R" "$T/engine.png" "$T/dom.html"; then
    for label in "Latency per operation (CDF)" "Hit rate over time" "L1 usage over time" \
        "Engine hit rate"; do
        grep -qF "$label" "$T/dom.html"; expect "the DOM has '$label'" $?
    done
    for id in latency-cdf hit-rate l1-usage; do
        grep -q "<figure id=\"$id\">" "$T/dom.html"; expect "the DOM has the figure '$id'" $?
    done
fi

# --- errors -----------------------------------------------------------------------------------
expect_rc "an --html path that cannot be written exits 1" 1 \
    "$LMCACHE" trace replay "$T/rec.lct" $SM --pace virtual --output-dir "$T" --no-csv -q \
    --html "$T/nodir/r.html"
grep -q -- "cannot write --html '$T/nodir/r.html'" "$T/err"; expect "the error names --html and the path" $?
! grep -q "trace replay: file=" "$T/err"; expect "it fails before the replay starts" $?
[ ! -e "$T/nodir" ]; expect "nothing is left behind" $?
expect_rc "--html without a value exits 2" 2 "$LMCACHE" trace replay "$T/rec.lct" $SM --html
grep -q -- "--html: a value is required" "$T/err"; expect "the usage error names --html" $?
"$LMCACHE" trace replay --help | grep -q -- "--html PATH"; expect "--help lists --html" $?

e2e_report test_replay_report
