#!/usr/bin/env bash
# `lmcache bench micro --quick --json GROUP` for every group, so that the
# benchmarks cannot rot: each run exits 0 and prints one valid JSON line per
# metric with a finite value, exactly the metrics docs/benchmarks.md lists
# for the group (its tables are the list; LTTng-UST is optional at build
# time, so lttng_* metrics may be a note or absent), each with the median,
# min, max and count of its trials. The server group starts
# its own server; the sm group's resp metrics start a redis-server child.
# Usage: test_bench_micro.sh path/to/lmcache path/to/tools-dir
set -u
LMCACHE=$(realpath "${1:?usage: $0 lmcache tools-dir}")
TOOLS=$(realpath "${2:?usage: $0 lmcache tools-dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
DOC="$HERE/../../docs/benchmarks.md"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
expect() { if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi; }

[ -f "$DOC" ] || { echo "missing $DOC"; exit 1; }

# The metric names in the tables under "## `GROUP`: ..." (first column, in backquotes).
documented() {
    awk -v g="$1" '
        /^## / { inside = index($0, "## `" g "`") == 1 }
        inside && /^\| `/ { split($0, f, "`"); print f[2] }' "$DOC"
}

for group in sm trace replay server; do
    metrics=$(documented "$group")
    [ -n "$metrics" ]; expect "docs/benchmarks.md lists the metrics of group $group" $?
    start=$(date +%s)
    timeout -k 5 120 "$LMCACHE" bench micro --quick --json "$group" > "$T/$group.jsonl" 2> "$T/$group.err"
    rc=$?
    secs=$(($(date +%s) - start))
    [ "$rc" = 0 ] || { echo "--- stderr of group $group:"; cat "$T/$group.err"; }
    expect "bench micro --quick $group exits 0 (rc $rc, ${secs} s)" "$rc"
    # shellcheck disable=SC2086
    "$TOOLS/check_bench_json" "$group" $metrics -- lttng_ < "$T/$group.jsonl"
    expect "group $group prints one valid line per documented metric, each finite" $?
done

# The checker itself: a line without the spread, or with the median outside it, fails.
line='{"bench": "g", "metric": "m", "value": 2, "unit": "ns"'
echo "$line, \"min\": 1, \"max\": 3, \"trials\": 5}" | "$TOOLS/check_bench_json" g m 2>/dev/null
expect "a metric line with median, min, max and trials passes" $?
echo "$line}" | "$TOOLS/check_bench_json" g m 2>/dev/null
[ $? = 1 ]; expect "a metric line without min, max and trials fails" $?
echo "$line, \"min\": 2.5, \"max\": 3, \"trials\": 5}" | "$TOOLS/check_bench_json" g m 2>/dev/null
[ $? = 1 ]; expect "a median below min fails" $?
echo "$line, \"min\": 1, \"max\": 3, \"trials\": 0}" | "$TOOLS/check_bench_json" g m 2>/dev/null
[ $? = 1 ]; expect "zero trials fails" $?

err=$("$LMCACHE" bench micro --quick --json nosuchgroup 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] && echo "$err" | grep -q "unknown group 'nosuchgroup'"
expect "an unknown group exits 2 with a message" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
