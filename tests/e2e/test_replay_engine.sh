#!/usr/bin/env bash
# trace replay --mode engine against live runs (issue 14): record a Mooncake
# workload with `lmcache server` at one L1 size (0.05 GiB), run the same live
# bench against a server at a second size (0.1 GiB, where the hit rate differs
# clearly), and check that the engine-mode replay of the recording at the
# second size gives the live run's hit rate within 0.03, and at the recorded
# size the recorded one; that the recording's own hit rate is the bench's;
# and that mode calls reports its agreement figure.
# L1 is small enough that eviction (every second) shapes the hit rates.
# Usage: test_replay_engine.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"
# |a - b| <= tol
close() { python3 -c "import sys; sys.exit(abs($1 - $2) > $3)"; }

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
REQUESTS=1500
REC_GB=0.05 LIVE_GB=0.1

# live NAME GB [server flags...]: the workload through a server at GB (mooncake_run).
live() {
    local name=$1 gb=$2
    shift 2
    mooncake_run "$name" $REQUESTS --l1-size-gb "$gb" --eviction-policy LRU "$@"
}

# --- the recording, and a live run at the second size ---------------------------
live rec $REC_GB --trace-level storage --trace-output "$T/rec.lct"
live second $LIVE_GB
live_rec=$(json_get "$T/rec.bench.json" "r['hit_rate']")
live_second=$(json_get "$T/second.bench.json" "r['hit_rate']")
echo "live hit rates: $live_rec at $REC_GB GiB, $live_second at $LIVE_GB GiB"
# More apart than the tolerance below, or the check would say little.
close "$live_rec" "$live_second" 0.03
[ $? = 1 ]; expect "the two sizes give clearly different live hit rates ($live_rec, $live_second)" $?

# replay NAME GB MODE [flags...]: a virtual replay of the recording at GB.
replay() {
    local name=$1 gb=$2 mode=$3
    shift 3
    "$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb "$gb" --eviction-policy LRU --mode "$mode" \
        --pace virtual --no-csv --json --output-dir "$T/$name" "$@" > "$T/$name.out" 2> "$T/$name.err"
    expect "the $mode replay at $gb GiB exits 0" $?
}

# --- engine mode: what each size would have given -------------------------------
replay engine-second $LIVE_GB engine
R="$T/engine-second/trace_replay_summary.json"
engine_second=$(json_get "$R" "r['outcomes']['figures']['engine_hit_rate']")
echo "engine hit rate at $LIVE_GB GiB: $engine_second (live $live_second)"
close "$engine_second" "$live_second" 0.03
expect "engine mode at $LIVE_GB GiB ($engine_second) is within 0.03 of the live run ($live_second)" $?
[ "$(json_get "$R" "r['mode']")" = engine ]; expect "the result says mode engine" $?
recorded=$(json_get "$R" "r['outcomes']['figures']['recorded_hit_rate']")
close "$recorded" "$live_rec" 1e-9
expect "the recording's own hit rate ($recorded) is the recording bench's ($live_rec)" $?
looked=$(json_get "$R" "r['outcomes']['figures']['looked_up_keys']")
[ "$looked" = "$(json_get "$T/rec.bench.json" "r['chunks_looked_up']")" ]
expect "every chunk the bench looked up was looked up again ($looked)" $?
[ "$(json_get "$R" "r['trace']['records']['failed']")" = 0 ]; expect "no record failed" $?
grep -q "^Engine hit rate:  *[0-9.]*% ([0-9]* of $looked keys)$" "$T/engine-second.out" &&
    grep -q "^Recorded hit rate:  *[0-9.]*% (the recording's own)$" "$T/engine-second.out"
expect "the table shows the engine hit rate beside the recording's" $?

replay engine-rec $REC_GB engine
engine_rec=$(json_get "$T/engine-rec/trace_replay_summary.json" "r['outcomes']['figures']['engine_hit_rate']")
echo "engine hit rate at $REC_GB GiB: $engine_rec (live $live_rec)"
close "$engine_rec" "$live_rec" 0.03
expect "engine mode at the recorded size ($engine_rec) is within 0.03 of the recording ($live_rec)" $?

# --- calls mode at the second size: its agreement with the recording ------------
replay calls-second $LIVE_GB calls
agreement=$(json_get "$T/calls-second/trace_replay_summary.json" "r['outcomes']['figures']['read_agreement']")
echo "calls-mode agreement at $LIVE_GB GiB: $agreement"
python3 -c "import sys; sys.exit(not 0 <= $agreement <= 1)"
expect "calls mode reports its agreement ($agreement)" $?
grep -q "^Recorded hits still hit:  *[0-9.]*%" "$T/calls-second.out"
expect "the calls table shows the agreement" $?

# --- flags ------------------------------------------------------------------------
"$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb 0.1 --eviction-policy LRU --mode server \
    > /dev/null 2> "$T/bad.err"
[ $? = 2 ] && grep -q "^lmcache trace replay: --mode: unknown mode 'server' (expected calls or engine)$" "$T/bad.err"
expect "an unknown --mode is a usage error naming the choices" $?
"$LMCACHE" trace replay --help | grep -q -- "--mode M *calls|engine"
expect "--help lists --mode" $?

e2e_report test_replay_engine
