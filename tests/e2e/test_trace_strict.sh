#!/usr/bin/env bash
# Issue 13 end to end: `trace info`, the replay summary and an independent
# strict reader (tests/tools/lct_strict.py, Python standard library only)
# agree on record, malformed and skipped counts over a corpus of damaged
# traces; escaped output; pipes; 1 M records over 100 k qualnames in
# seconds; impossible times; --time-scale messages; LMCache's observability
# flags; the config digest LMCache writes.
# Usage: test_trace_strict.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"
STRICT="$HERE/../tools/lct_strict.py"
if ! command -v python3 >/dev/null; then
    echo "SKIP: python3 is needed for the independent reader"
    exit 0
fi
export LMCACHE_LOG_LEVEL=error
SM="--l1-size-gb 0.0625 --eviction-policy LRU"
"$TOOLS/make_trace" cycle "$T/cycle.lct" || { echo "cannot make the base trace"; exit 1; }

# --- one reader: the commands agree with an independent strict reader ------
python3 "$STRICT" corpus "$T/corpus" "$T/cycle.lct" >/dev/null
out=$(python3 "$STRICT" check "$LMCACHE" "$T/corpus"); rc=$?
[ $rc = 0 ]; expect "info, replay and the independent reader agree on every damaged file: $out" $?

# --- output that cannot be forged ------------------------------------------
python3 "$STRICT" names "$T/names.lct"
out=$("$LMCACHE" trace info "$T/names.lct"); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qxF '    a\x00b: 2' && echo "$out" | grep -qxF '    a\x00c: 1' &&
    echo "$out" | grep -qxF '    \x1b[2J: 1' && echo "$out" | grep -qxF '    x\n    forged: 9: 1' &&
    echo "$out" | grep -qxF '    bidi\u202eevil: 1' &&
    echo "$out" | grep -qxF '  level:                      stor\x1bage'
expect "info escapes qualnames and header strings, one row per distinct name" $?
! printf '%s' "$out" | grep -q $'\x1b'; expect "info prints no control character" $?

# --- pipes ------------------------------------------------------------------
out=$(cat "$T/cycle.lct" | "$LMCACHE" trace info /dev/stdin); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "total_records:              6"
expect "info reads a pipe in one pass" $?
out=$(cat "$T/cycle.lct" | "$LMCACHE" trace replay /dev/stdin $SM --no-csv --output-dir "$T" \
    --format json --time-scale 1e-9 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q '"replayed": 6'
expect "replay reads a pipe in one pass" $?

# --- no quadratic time ------------------------------------------------------
python3 "$STRICT" many "$T/many.lct" 1000000 100000
start=$(date +%s)
out=$("$LMCACHE" trace info "$T/many.lct"); rc=$?
took=$(($(date +%s) - start))
rows=$(echo "$out" | grep -c '^    op\.')
[ $rc = 0 ] && [ "$rows" = 100000 ] && echo "$out" | grep -q "total_records:              1000000" &&
    [ "$took" -le 30 ]
expect "info over 1 M records and 100 k qualnames in seconds (took ${took} s, $rows rows)" $?
rm -f "$T/many.lct"

# --- no hang ----------------------------------------------------------------
start=$(date +%s)
out=$(LMCACHE_LOG_LEVEL=warning timeout 120 "$LMCACHE" trace replay "$T/corpus/times.lct" $SM --no-csv --output-dir "$T" \
    --format json --time-scale 0.01 2>"$T/times.err"); rc=$?
took=$(($(date +%s) - start))
[ $rc = 0 ] && echo "$out" | grep -q '"replayed": 7' && [ "$took" -le 30 ] &&
    grep -q "the time rule moved" "$T/times.err"
expect "t_mono 1e9, 1e300, NaN, inf and negative replay at once, reported (took ${took} s)" $?
err=$("$LMCACHE" trace replay "$T/cycle.lct" $SM --time-scale 1e-320 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "'1e-320' is a number too close to 0"
expect "--time-scale 1e-320 gets a clear message" $?
err=$("$LMCACHE" trace replay "$T/cycle.lct" $SM --time-scale 1e300 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && echo "$err" | grep -q "1e+300 is above 1e+06"
expect "--time-scale 1e300 is refused" $?

# --- LMCache's command line -------------------------------------------------
err=$(LMCACHE_LOG_LEVEL=warning "$LMCACHE" trace replay "$T/cycle.lct" $SM -q --no-csv \
    --output-dir "$T" --disable-metrics --enable-tracing --otlp-endpoint http://x:4317 \
    --prometheus-port 9090 --event-bus-queue-size 100 --trace-level storage \
    --enable-extra-logging --extra-logging-interval 5 2>&1 >/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$err" | grep -c "ignoring")" = 1 ] &&
    echo "$err" | grep -q "ignoring --disable-metrics, --enable-tracing, --otlp-endpoint"
expect "LMCache's observability flags are accepted and ignored with one note" $?
DIGEST=661c3ec0547641894937c6c884da42e51529925cda0d3faaa29ed1f7dcc9aae0
python3 "$STRICT" many "$T/digest.lct" 1 1 "$DIGEST"
out=$("$LMCACHE" trace replay "$T/digest.lct" $SM --shm-name "" --no-csv --output-dir "$T" \
    --time-scale 1e-9 2>/dev/null)
echo "$out" | grep -q "Config digest: *match (661c3ec0)"
expect "the flags LMCache recorded with give LMCache's digest" $?

e2e_report test_trace_strict
