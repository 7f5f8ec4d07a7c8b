#!/usr/bin/env bash
# Replay outcomes against the live run they came from: record a Mooncake
# workload with `lmcache server` driven by `lmcache bench server`, replay the
# trace with the recorded configuration, and check the replay's outcome
# figures against what the server and the bench counted where they measure
# the same thing (calls, reservations made, keys looked up, reads found).
# L1 is large enough that nothing is evicted, so the figures do not depend on
# the host's timing.
# Usage: test_replay_outcomes.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"

[ -f "$MOONCAKE" ] || { echo "missing $MOONCAKE"; exit 1; }
SM="--l1-size-gb 0.1 --eviction-policy LRU"
FS="{\"type\": \"fs\", \"base_path\": \"$T/l2\"}"

# --- record ----------------------------------------------------------------------
mkdir -p "$T/l2"
LMCACHE_LOG_LEVEL=INFO record_mooncake "$T/rec.lct" 150 $SM --l2-adapter "$FS" \
    --counters-output "$T/counters.json"
BENCH="$T/record.bench.json"

# --- replay with the recorded configuration --------------------------------------
"$LMCACHE" trace replay "$T/rec.lct" $SM --l2-adapter "$FS" --clear-l2 --output-dir "$T/r" --json \
    > "$T/replay.out" 2> "$T/replay.err"
expect "the replay of the recorded configuration exits 0" $?
R="$T/r/trace_replay_summary.json"
grep -q "^Config digest:  *match (" "$T/replay.out"; expect "the config digest matches the recording" $?
grep -q "removed [0-9]* object(s)" "$T/replay.err"; expect "--clear-l2 removed the recording's L2 objects" $?

# Calls: one record per StorageManager call the server made.
for pair in reserve_write:reserve_write finish_write:finish_write submit_prefetch:submit_prefetch_task \
    read_enter:read_prefetched_results.__enter__ read_exit:read_prefetched_results.__exit__ \
    finish_read:finish_read_prefetched; do
    op=${pair%%:*} counter=${pair#*:}
    got=$(json_get "$R" "r['outcomes']['ops']['$op']['records']")
    want=$(json_get "$T/counters.json" "r['$counter']")
    [ "$got" = "$want" ]; expect "$op records ($got) equal the server's $counter calls ($want)" $?
done

# Keys: what the bench looked up, stored and read.
chunk_bytes=$((256 * 16))
looked=$(json_get "$R" "r['outcomes']['figures']['looked_up_keys']")
want=$(json_get "$BENCH" "r['chunks_looked_up']")
[ "$looked" = "$want" ]; expect "keys looked up ($looked) equal the bench's chunks looked up ($want)" $?
# The bench counts every chunk it sent to store; two requests that missed the same
# chunk both send it, and the second reservation is refused (already present or
# being written), so keys requested = chunks sent, and only the reserved ones reach L2.
requested=$(json_get "$R" "r['outcomes']['ops']['reserve_write']['keys']")
want=$(( $(json_get "$BENCH" "r['bytes_stored']") / chunk_bytes ))
[ "$requested" = "$want" ]; expect "keys the reservations asked for ($requested) equal the chunks the bench stored ($want)" $?
reserved=$(json_get "$R" "r['outcomes']['figures']['reserved_keys']")
dup=$(json_get "$R" "r['outcomes']['ops']['reserve_write']['already_present'] + r['outcomes']['ops']['reserve_write']['write_locked']")
oom=$(json_get "$R" "r['outcomes']['ops']['reserve_write']['out_of_memory']")
[ "$oom" = 0 ] && [ $((reserved + dup)) = "$requested" ]
expect "every reservation was made but for chunks another request stored first ($reserved + $dup of $requested)" $?
stored=$(json_get "$R" "r['outcomes']['l2']['stored_bytes']")
[ "$stored" = $((reserved * chunk_bytes)) ]
expect "bytes stored to L2 ($stored) are the reserved chunks' ($reserved x $chunk_bytes)" $?
found=$(json_get "$R" "r['outcomes']['figures']['read_keys_found']")
want=$(json_get "$BENCH" "r['hit_chunks']")
[ "$found" = "$want" ]; expect "keys the reads found ($found) equal the bench's hit chunks ($want)" $?
hit=$(json_get "$R" "r['outcomes']['figures']['reads_still_hit']")
want=$(json_get "$T/counters.json" "r['read_prefetched_results.__enter__']")
[ "$hit" = "$want" ]; expect "every recorded read still hits ($hit of $want)" $?
rate=$(json_get "$R" "r['outcomes']['figures']['chunk_hit_rate']")
want=$(json_get "$BENCH" "r['hit_rate']")
python3 -c "import sys; sys.exit(abs($rate - $want) > 1e-9)"
expect "the chunk hit rate ($rate) equals the bench's hit rate ($want)" $?
grep -q "^Recorded hits still hit:  *100.0%$" "$T/replay.out"; expect "the table shows full agreement" $?
[ "$(json_get "$R" "r['outcomes']['l1']['evicted_keys']")" = 0 ]; expect "nothing was evicted" $?

# --- another configuration: the differences are named ----------------------------
mkdir -p "$T/l2b"
out=$("$LMCACHE" trace replay "$T/rec.lct" --l1-size-gb 0.02 --eviction-policy LRU \
    --l2-adapter "{\"type\": \"fs\", \"base_path\": \"$T/l2b\"}" --no-csv --output-dir "$T/r2" 2>/dev/null)
expect "a replay with another configuration exits 0" $?
echo "$out" | grep -q "^Config differs:  *l1_manager_config.memory_config.size_in_bytes$" &&
    echo "$out" | grep -q "^Config differs:  *l2_adapter_config.adapters\[0\].base_path$"
expect "the table names the config fields that differ" $?
echo "$out" | grep -q "^Reservations refused (keys):  *[0-9]* of $requested$"
expect "the smaller L1's refused reservations are counted" $?

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
