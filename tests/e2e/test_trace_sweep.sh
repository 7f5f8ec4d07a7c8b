#!/usr/bin/env bash
# `lmcache trace sweep` end to end, as a user runs it: record a Mooncake
# workload through `lmcache server` and `lmcache bench server`, sweep it over
# L1 sizes x eviction policies (engine mode, virtual time: the defaults), and
# check the sweep against itself and the other tools: the JSON parses and has
# one result per configuration, each result's hit rate and digest equal a
# separate `trace replay` of that configuration, the table is sorted by hit
# rate, the digests repeat on a second run, the CSV has a row per
# configuration, `trace compare` reads two of its results by --config, a
# configuration that fails (an fs L2 adapter whose base_path cannot be made; a
# crash forced with the test hook LMCACHE_SWEEP_TEST_CRASH) is reported while
# the others complete, Ctrl-C stops it with exit 130 and no replay left
# running, flag errors exit 2 naming the flag, and the HTML report renders in
# headless Chromium (skipped, saying so, only when Chromium is not installed).
# Usage: test_trace_sweep.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (scripts/install-deps)"; exit 1; }

# --- 1. record, then sweep 2 sizes x 2 policies -----------------------------------
record_mooncake "$T/rec.lct" 300 --l1-size-gb 0.05 --eviction-policy LRU
SIZES=0.005,0.02
POLICIES=LRU,noop
"$LMCACHE" trace sweep "$T/rec.lct" --l1-size-gb $SIZES --eviction-policy $POLICIES --jobs 2 \
    --csv "$T/sweep.csv" --html "$T/sweep.html" > "$T/table.txt" 2> "$T/progress.txt"
_st=$?; expect "trace sweep exits 0: $(tail -2 "$T/progress.txt")" $_st
"$LMCACHE" trace sweep "$T/rec.lct" --l1-size-gb $SIZES --eviction-policy $POLICIES --jobs 2 \
    --format json --output "$T/sweep.json" -q > "$T/quiet.out" 2> "$T/quiet.err"
expect "trace sweep --format json --output -q exits 0" $?
[ ! -s "$T/quiet.out" ] && [ ! -s "$T/quiet.err" ]; expect "-q prints nothing" $?
python3 -m json.tool "$T/sweep.json" > /dev/null; expect "the sweep JSON parses" $?

# Progress: one line per configuration, each with its digest.
[ "$(grep -c '^\[[1-4]/4\] --l1-size-gb .* --eviction-policy .*: hit .*% (L1 .*%, L2 .*%), .* s, digest [0-9a-f]\{16\}$' "$T/progress.txt")" = 4 ]
expect "a progress line per configuration, with its hit rate and digest" $?

python3 - "$T/sweep.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["schema"] == "lmcache.sweep_result" and s["schema_version"] == 1, s["schema"]
assert s["status"] == "complete" and s["failed"] == [] and s["not_run"] == 0
assert [a["flag"] for a in s["grid"]["axes"]] == ["--l1-size-gb", "--eviction-policy"]
assert s["grid"]["mode"] == "engine" and s["grid"]["pace"] == "virtual"
assert len(s["results"]) == 4 and len(s["grid"]["configurations"]) == 4
# The order: the flags' order on the command line, the last varying fastest.
want = [("0.005", "LRU"), ("0.005", "noop"), ("0.02", "LRU"), ("0.02", "noop")]
for i, (c, r) in enumerate(zip(s["grid"]["configurations"], s["results"])):
    assert c["index"] == i and c["result"] == i and c["state"] == "done"
    assert c["flags"] == ["--l1-size-gb", want[i][0], "--eviction-policy", want[i][1]], c
    assert r["schema"] == "lmcache.trace_replay_result" and r["mode"] == "engine"
    assert r["config"]["json"]["eviction_config"]["eviction_policy"] == want[i][1]
    size = r["config"]["json"]["l1_manager_config"]["memory_config"]["size_in_bytes"]
    assert size == int(float(want[i][0]) * 2**30), (size, want[i])
    assert r["trace"]["digest"] == s["trace"]["digest"]
EOF
expect "the JSON has one full replay result per configuration, in grid order" $?

# Each configuration equals a replay of its own.
for i in 0 1 2 3; do
    read -r size policy < <(python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['grid']['configurations'][int(sys.argv[2])]['flags']; print(f[1], f[3])" "$T/sweep.json" $i)
    "$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb "$size" --eviction-policy "$policy" \
        --mode engine --pace virtual --no-csv -q --format json --output "$T/one-$i.json" 2> "$T/one.err"
    expect "trace replay of configuration $i exits 0" $?
    python3 - "$T/sweep.json" "$T/one-$i.json" $i <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"][int(sys.argv[3])]
o = json.load(open(sys.argv[2]))
f, g = r["outcomes"]["figures"], o["outcomes"]["figures"]
assert f["engine_hit_rate"] == g["engine_hit_rate"], (f["engine_hit_rate"], g["engine_hit_rate"])
assert r["outcome_digest"] == o["outcome_digest"]
EOF
    expect "configuration $i ($size GiB, $policy): the hit rate and digest of its own replay" $?
done

# The table: every configuration, sorted by hit rate (highest first).
grep -q "^  l1-size-gb eviction-policy hit rate" "$T/table.txt"; expect "the table has its header" $?
python3 - "$T/table.txt" "$T/sweep.json" <<'EOF'
import json, re, sys
rows = [l.split() for l in open(sys.argv[1]) if re.match(r"^  0\.0", l)]
assert len(rows) == 4, rows
hits = [float(r[2].rstrip("%")) for r in rows]
assert hits == sorted(hits, reverse=True), hits
s = json.load(open(sys.argv[2]))
want = {(c["flags"][1], c["flags"][3]): s["results"][c["result"]]["outcome_digest"][:16]
        for c in s["grid"]["configurations"]}
for r in rows:
    assert want[(r[0], r[1])] == r[-1], (r, want)
EOF
expect "the table lists every configuration, sorted by hit rate, with its digest" $?

# The digests repeat: virtual time gives the same outcomes every run.
"$LMCACHE" trace sweep "$T/rec.lct" --l1-size-gb $SIZES --eviction-policy $POLICIES --jobs 1 \
    --format json -q --output "$T/again.json"
expect "a second sweep (--jobs 1) exits 0" $?
python3 - "$T/sweep.json" "$T/again.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
da = [r["outcome_digest"] for r in a["results"]]
db = [r["outcome_digest"] for r in b["results"]]
assert da == db, (da, db)
EOF
expect "the digests repeat on a second run" $?

# CSV: a header and a row per configuration.
head -1 "$T/sweep.csv" | grep -q "^index,status,l1-size-gb,eviction-policy,hit_rate,l1_hit_rate,l2_hit_rate,"
expect "the CSV has its header" $?
[ "$(grep -c ',ok,' "$T/sweep.csv")" = 4 ]; expect "the CSV has a row per configuration" $?

# trace compare reads two of its results.
"$LMCACHE" trace compare "$T/sweep.json" "$T/sweep.json" --base-config 0 \
    --new-config eviction_policy=noop,size_in_bytes=5368709 > "$T/compare.txt" 2> "$T/compare.err"
rc=$?
[ $rc = 0 ] && grep -qF "'$T/sweep.json'[0]" "$T/compare.txt" && grep -qF "'$T/sweep.json'[1]" "$T/compare.txt"
_st=$?; expect "trace compare reads results 0 and 1 by --config (exit $rc: $(head -2 "$T/compare.err"))" $_st
"$LMCACHE" trace compare "$T/sweep.json" "$T/sweep.json" --base-config 2 --new-config 3 > /dev/null
expect "trace compare reads results by index" $?

# --- 2. failures: one configuration fails, the others complete -------------------
LMCACHE_SWEEP_TEST_CRASH=0 "$LMCACHE" trace sweep "$T/rec.lct" --l1-size-gb 0.005,0.02 \
    --eviction-policy LRU --l2-adapter-choice none \
    --l2-adapter-choice "{\"type\": \"fs\", \"base_path\": \"/proc/lmcache-sweep-test/l2\"}" --clear-l2 \
    --format json --output "$T/failed.json" > "$T/failed.out" 2> "$T/failed.err"
rc=$?
[ $rc = 1 ]; expect "a sweep with failed configurations exits 1 (got $rc)" $?
python3 - "$T/failed.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "complete"
f = {x["index"]: x for x in s["failed"]}
assert sorted(f) == [0, 1, 3], sorted(f)
assert f[0]["signal"] == 11 and "forced crash" in f[0]["stderr_tail"], f[0]
for i in (1, 3):
    assert f[i]["exit_status"] == 1 and "cannot create base_path" in f[i]["stderr_tail"], f[i]
    assert f[i]["flags"][-2] == "--l2-adapter", f[i]["flags"]
assert len(s["results"]) == 1 and s["grid"]["configurations"][2]["result"] == 0
assert s["results"][0]["config"]["json"]["l2_adapter_config"]["adapters"] == []
EOF
expect "the failures are reported (signal, exit status, stderr) and the rest complete" $?
grep -q "^\[.*/4\] --l1-size-gb 0.005 --l2-adapter-choice none: FAILED: killed by signal 11" "$T/failed.err"
expect "the crash's progress line says it was killed by SIGSEGV" $?

# --- 3. Ctrl-C: exit 130, what finished reported, no replay left ------------------
"$LMCACHE" trace sweep "$T/rec.lct" --l1-size-gb 0.005,0.01,0.02,0.04 --eviction-policy LRU \
    --pace realtime --time-scale 10 --jobs 2 --format json --output "$T/int.json" > /dev/null 2> "$T/int.err" &
SWEEP=$!
PIDS+=("$SWEEP")
sleep 1
kill -INT "$SWEEP"
wait "$SWEEP"
rc=$?
[ $rc = 130 ]; expect "Ctrl-C: the sweep exits 130 (got $rc)" $?
grep -q "interrupted: .* of 4 configurations finished" "$T/int.err"; expect "Ctrl-C: it says what finished" $?
[ "$(json_get "$T/int.json" 'r["status"]')" = interrupted ]; expect "Ctrl-C: the JSON says interrupted" $?
sleep 0.5
! pgrep -f "trace replay $T/rec.lct" > /dev/null; expect "Ctrl-C: no replay is left running" $?

# --- 4. flag errors: exit 2 naming the flag, before anything runs -----------------
sweep_error() { # NAME WANT-TEXT ARGS...
    local name=$1 want=$2
    shift 2
    expect_rc "$name exits 2" 2 "$LMCACHE" trace sweep "$T/rec.lct" "$@"
    grep -qF -- "$want" "$T/err"; _st=$?; expect "$name names it ($(head -1 "$T/err"))" $_st
}
sweep_error "an empty list item" "--l1-size-gb: '0.5,,1' has an empty item" \
    --l1-size-gb 0.5,,1 --eviction-policy LRU
sweep_error "a bad size" "--l1-size-gb: 'abc' is not a number" \
    --l1-size-gb 0.5,abc --eviction-policy LRU
sweep_error "a bad policy" "--eviction-policy: 'BOGUS' is not one of" \
    --l1-size-gb 0.5 --eviction-policy LRU,BOGUS
sweep_error "a missing required flag" "--eviction-policy is required" --l1-size-gb 0.5
sweep_error "a flag given twice" "--l1-size-gb is given twice" \
    --l1-size-gb 0.5 --l1-size-gb 1 --eviction-policy LRU
sweep_error "a grid over --max-configs" "raise --max-configs" \
    --l1-size-gb 0.1,0.2,0.3 --eviction-policy LRU,ARC --max-configs 5
sweep_error "a bad --jobs" "--jobs: 0 is not in" --l1-size-gb 0.5 --eviction-policy LRU --jobs 0
sweep_error "a bad L2 choice" "--l2-adapter-choice: '[1]' is not" \
    --l1-size-gb 0.5 --eviction-policy LRU --l2-adapter-choice '[1]'
sweep_error "an L2 choice the adapter parser rejects" "--l2-adapter" \
    --l1-size-gb 0.5 --eviction-policy LRU --l2-adapter-choice '{"type": "nope"}'
sweep_error "fs adapters without --clear-l2" "add --clear-l2" --l1-size-gb 0.5,1 \
    --eviction-policy LRU --l2-adapter "{\"type\": \"fs\", \"base_path\": \"$T/l2\"}"
sweep_error "an unknown option" "unknown option '--bogus'" --l1-size-gb 0.5 --eviction-policy LRU --bogus
sweep_error "a bad --mode" "--mode:" --l1-size-gb 0.5 --eviction-policy LRU --mode fast
expect_rc "a missing trace exits 1" 1 "$LMCACHE" trace sweep "$T/none.lct" --l1-size-gb 0.5 \
    --eviction-policy LRU
grep -qF "none.lct" "$T/err"; expect "a missing trace is named" $?
expect_rc "an --html path that cannot be written exits 1" 1 "$LMCACHE" trace sweep "$T/rec.lct" \
    --l1-size-gb 0.5 --eviction-policy LRU --html "$T/nodir/r.html"
grep -qF -- "--html '$T/nodir/r.html'" "$T/err"; expect "the unwritable --html is named" $?
"$LMCACHE" trace sweep --help | grep -q "^usage: lmcache trace sweep"; expect "--help prints the usage" $?

# --- 5. the HTML report ------------------------------------------------------------
digest=$(json_get "$T/sweep.json" 'r["trace"]["digest"]')
for label in "Trace sweep" "Hit rate against L1 size" "hit rate (engine_hit_rate)" "L1 size (--l1-size-gb" \
    "LRU curve (trace analyze, exact)" "--eviction-policy noop" "Configurations, by hit rate" \
    "$digest" "lmcache trace sweep"; do
    grep -qF -- "$label" "$T/sweep.html"; expect "the report has '$label'" $?
done
! grep -qiE "<script|<link|@import|src=" "$T/sweep.html"; expect "the report loads nothing and runs nothing" $?
if chromium_render "$T/sweep.html" "$T/sweep.png" "$T/dom.html"; then
    for label in "Hit rate against L1 size" "--eviction-policy LRU" "LRU curve (trace analyze, exact)" \
        "L1 size (--l1-size-gb"; do
        grep -qF -- "$label" "$T/dom.html"; expect "the DOM has '$label'" $?
    done
    [ "$(grep -o '<svg class="chart"' "$T/dom.html" | wc -l)" = 1 ]; expect "the DOM has the chart" $?
    grep -q '<figure id="sweep-hit-rate">' "$T/dom.html"; expect "the DOM has the chart's figure" $?
    grep -q '<table id="sweep-table"' "$T/dom.html"; expect "the DOM has the table" $?
fi

e2e_report test_trace_sweep
