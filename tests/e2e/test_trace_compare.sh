#!/usr/bin/env bash
# trace compare, end to end: record a Mooncake workload with `lmcache server`
# driven by `lmcache bench server`, replay it in virtual time (deterministic)
# as a baseline, again with the same config, and with a smaller L1; then
# compare: the same config gives equal digests and exit 0; the smaller L1
# exits 1 on a hit-rate threshold and names the first divergent record, which
# must be the first line where the two per-record outcome files differ;
# usage errors (bad threshold, missing file, malformed JSON, different
# traces) exit 2.
# Usage: test_trace_compare.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
cd "$T" || exit 1

# --- record ----------------------------------------------------------------------
record_mooncake "$T/rec.lct" 150 --l1-size-gb 0.1 --eviction-policy LRU

# --- replays in virtual time -------------------------------------------------------
replay() { # replay NAME L1_GB [extra flags]: NAME.json (result) and NAME.jsonl (records)
    local name=$1 gb=$2
    shift 2
    "$LMCACHE" trace replay rec.lct --l1-size-gb "$gb" --eviction-policy LRU --pace virtual \
        --no-csv --format json --jsonl-out "$name.jsonl" "$@" > "$name.json" 2> "$name.err"
    expect "replay $name exits 0" $?
}
replay base 0.1
replay same 0.1
replay small 0.005
replay rep 0.1 --repeat 2
[ "$(json_get base.json 'r["trace"]["digest"]')" = "$(json_get small.json 'r["trace"]["digest"]')" ]
expect "every replay of the trace names it by the same trace.digest" $?

# --- the same config: equal digests, exit 0 ------------------------------------------
expect_rc "compare of two replays of the same config exits 0" 0 \
    "$LMCACHE" trace compare base.json same.json --max-regression chunk_hit_rate=-0 \
    --max-regression 'refused_keys=+0' --require-same-outcomes
grep -q "^  trace: *same (rec.lct, digest " out; expect "the trace is the same one" $?
grep -q "^  outcome digest: *equal" out; expect "the outcome digests are equal" $?
grep -q "^  differs: *nothing in config" out; expect "nothing differs in config" $?
grep -q "^Result: ok: 2 thresholds, none exceeded" out; expect "no threshold is exceeded" $?
! grep -q "First divergent record" out; expect "equal digests: no divergence to search" $?
"$LMCACHE" trace compare base.json same.json --format json > same_cmp.json
expect "compare --format json exits 0" $?
[ "$(json_get same_cmp.json 'r["outcome_digests_equal"]')" = True ]
expect "the JSON says the outcome digests are equal" $?
[ "$(json_get same_cmp.json 'r["figures"]["outcomes.figures.chunk_hit_rate"]["verdict"]')" = equal ]
expect "the JSON has the hit rate equal" $?
[ "$(json_get same_cmp.json 'r["exit_status"]')" = 0 ]; expect "the JSON's exit_status is 0" $?

# --repeat: medians, and the runs' spread beside them.
expect_rc "compare with a --repeat result exits 0" 0 "$LMCACHE" trace compare rep.json base.json
grep -q "^  repeat: *base 2 runs (digests equal), new 1 run; values are medians" out
expect "the repeat runs are named" $?
grep -q "base range" out; expect "the table has the base's range column" $?

# --- a smaller L1: exit 1 on the hit rate, and the first divergent record ------------------
expect_rc "a smaller L1 exits 1 on a hit-rate threshold" 1 \
    "$LMCACHE" trace compare base.json small.json --max-regression chunk_hit_rate=-0.01 \
    --max-regression 'p99_ms=+100000%'
grep -q "^outcomes.figures.chunk_hit_rate .*REGRESSED (chunk_hit_rate=-0.01)" out
expect "the hit rate's row says REGRESSED naming the threshold" $?
grep -q "^  chunk_hit_rate=-0.01: outcomes.figures.chunk_hit_rate " out
expect "the result names the exceeded threshold" $?
grep -q "^    l1_manager_config.memory_config.size_in_bytes  *107374182 -> 5368709" out
expect "the config difference is shown with both values" $?
grep -q "^  outcome digest: *DIFFERENT" out; expect "the outcome digests differ" $?
grep -q "^First divergent record: #[0-9]* at t_mono " out; expect "the first divergent record is named" $?
grep -q "the first: chunk_hash [0-9a-f]*, model \"bench-model\"" out
expect "its first key is read back from the trace" $?
grep -q "lmcache trace dump rec.lct --from [0-9.]* --limit 20" out; expect "it points at trace dump" $?
# The dump it points at lists the divergent record (first, unless another shares its microsecond).
dump_cmd=$(grep -o "lmcache trace dump rec.lct --from [0-9.]* --limit 20" out)
index=$(sed -n 's/^First divergent record: #\([0-9]*\) .*/\1/p' out)
"$LMCACHE" ${dump_cmd#lmcache } --no-header > dump.out 2> dump.err
expect "the trace dump it names exits 0" $?
awk -v i="$index" '$1 == i {found = 1} END {exit !found}' dump.out
expect "that dump lists the divergent record (#$index)" $?
"$LMCACHE" trace compare base.json small.json --max-regression chunk_hit_rate=-0.01 \
    --format json > small_cmp.json
expect "compare --format json of a regression exits 1" $([ $? = 1 ]; echo $?)
# The first line where the two JSONL files' outcomes differ, found independently.
want=$(python3 - base.jsonl small.jsonl <<'EOF'
import json, sys
for a, b in zip(open(sys.argv[1]), open(sys.argv[2])):
    a, b = json.loads(a), json.loads(b)
    if a["outcome"] != b["outcome"]:
        print(a["index"], a["qualname"], a["n_keys"])
        break
EOF
)
got=$(json_get small_cmp.json 'r["first_divergence"]["index"], r["first_divergence"]["qualname"], r["first_divergence"]["n_keys"]' | tr -d "(),'")
[ -n "$want" ] && [ "$got" = "$want" ]
expect "the first divergent record ($got) is the first whose outcome differs ($want)" $?
[ "$(json_get small_cmp.json 'r["first_divergence"]["first_key"]["model_name"]')" = bench-model ]
expect "the JSON carries the first key" $?
[ "$(json_get small_cmp.json 'r["thresholds"][0]["exceeded"]')" = "['outcomes.figures.chunk_hit_rate']" ]
expect "the JSON lists what the threshold caught" $?
# The same record, found through --jsonl with the files moved away from outputs.jsonl.
mkdir -p moved && cp base.jsonl small.jsonl moved/
expect_rc "--jsonl names the per-record files" 1 \
    "$LMCACHE" trace compare base.json small.json --max-regression chunk_hit_rate=-0.01 \
    --jsonl moved/base.jsonl moved/small.jsonl
grep -q "^First divergent record: #${want%% *} at" out; expect "--jsonl finds the same record" $?
# Results replayed without --jsonl-out: the search is not made, and the note says which lacks them.
for f in base small; do
    python3 -c "
import json, sys
r = json.load(open('$f.json'))
r['outputs'].pop('jsonl', None)
json.dump(r, open('${f}_nojsonl.json', 'w'))"
done
expect_rc "compare without per-record files exits 0" 0 "$LMCACHE" trace compare base.json small_nojsonl.json
grep -q "^First divergent record: not searched" out; expect "no per-record files: not searched" $?
grep -q "^  the new result carries no per-record outcomes: replay with --jsonl-out PATH" out
expect "the note names the result that lacks them" $?
expect_rc "compare of two results without per-record files exits 0" 0 \
    "$LMCACHE" trace compare base_nojsonl.json small_nojsonl.json
grep -q "^  neither result carries per-record outcomes: replay with --jsonl-out PATH" out
expect "the note says neither has them" $?

# A sweep result: one configuration chosen by index or by a config field.
python3 -c "
import json
r = [json.load(open(f)) for f in ('base.json', 'small.json')]
json.dump({'schema': 'lmcache.trace_sweep_result', 'results': r}, open('sweep.json', 'w'))"
expect_rc "a sweep's configuration chosen by a config field" 1 \
    "$LMCACHE" trace compare base.json sweep.json --config size_in_bytes=5368709 \
    --max-regression chunk_hit_rate=-0.01
grep -q "^  new: *'sweep.json'\[1\]" out; expect "the chosen configuration is named" $?
expect_rc "a sweep's configuration chosen by index" 0 \
    "$LMCACHE" trace compare sweep.json base.json --base-config 0 --require-same-outcomes

# --- usage errors exit 2 --------------------------------------------------------
expect_rc "a threshold without a sign exits 2" 2 \
    "$LMCACHE" trace compare base.json small.json --max-regression chunk_hit_rate=0.01
grep -q "needs a sign" err; expect "the message says the limit needs a sign" $?
expect_rc "a threshold that is not FIGURE=LIMIT exits 2" 2 \
    "$LMCACHE" trace compare base.json small.json --max-regression chunk_hit_rate
expect_rc "a threshold naming no figure exits 2" 2 \
    "$LMCACHE" trace compare base.json small.json --max-regression hit_rate=-0.01
grep -q "did you mean chunk_hit_rate" err; expect "the message suggests the figure names" $?
expect_rc "a missing file exits 2" 2 "$LMCACHE" trace compare base.json missing.json
grep -q "'missing.json': cannot open" err; expect "the message names the missing file" $?
head -c 200 base.json > broken.json
expect_rc "malformed JSON exits 2" 2 "$LMCACHE" trace compare base.json broken.json
grep -q "'broken.json': not valid JSON" err; expect "the message names the malformed file" $?
echo '{"requests": 150}' > other.json
expect_rc "a JSON that is no replay result exits 2" 2 "$LMCACHE" trace compare base.json other.json
grep -q "'other.json': not a replay result" err; expect "the message says it is no result" $?
expect_rc "a sweep result without --config exits 2" 2 "$LMCACHE" trace compare base.json sweep.json
grep -q "sweep result of 2 configurations" err; expect "a sweep needs --config" $?
expect_rc "missing --jsonl files exit 2" 2 \
    "$LMCACHE" trace compare base.json small.json --jsonl nope.jsonl small.jsonl
# A different trace: the recording cut short, replayed.
head -c $(( $(stat -c %s rec.lct) / 2 )) rec.lct > half.lct
"$LMCACHE" trace replay half.lct --l1-size-gb 0.1 --eviction-policy LRU --pace virtual --no-csv \
    --format json > half.json 2> half.err
expect "the replay of another trace exits 0" $?
expect_rc "results of different traces exit 2" 2 "$LMCACHE" trace compare base.json half.json
grep -q "replayed different traces" err; expect "the message says the traces differ" $?
expect_rc "--allow-different-trace compares them anyway" 0 \
    "$LMCACHE" trace compare base.json half.json --allow-different-trace
grep -q "^  trace: *DIFFERENT" out; expect "the report says the traces differ" $?
expect_rc "--help exits 0" 0 "$LMCACHE" trace compare --help
grep -q "max-regression" out; expect "--help documents the thresholds" $?

e2e_report test_trace_compare
