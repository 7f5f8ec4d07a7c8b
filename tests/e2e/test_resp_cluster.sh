#!/usr/bin/env bash
# `lmcache trace replay` with the "resp" L2 adapter on a real 3-master Redis
# Cluster (started by tools/redis_cluster, stopped at exit): the config is
# accepted, the replay stores its keys across the masters, a bad cluster
# config exits 2 naming the field, and an unreachable cluster does not hold
# the replay up.
# Usage: test_resp_cluster.sh path/to/lmcache path/to/tools-dir
set -u
. "$(dirname "$0")/lib.sh" "$@"
# The cluster tool stops its redis servers on SIGTERM, so it is not in PIDS (kill -9).
CPID=
stop_cluster() {
    if [ -n "$CPID" ]; then kill "$CPID" 2>/dev/null; wait "$CPID" 2>/dev/null; fi
    CPID=
}
at_exit stop_cluster

"$TOOLS/make_trace" store "$T/store.lct" || { echo "cannot make the fixture"; exit 1; }
SM="--l1-size-gb 0.01 --eviction-policy LRU"

"$TOOLS/redis_cluster" 3 "$T/cluster.txt" 2> "$T/cluster.err" &
CPID=$!
for _ in $(seq 300); do
    [ -f "$T/cluster.txt" ] && break
    kill -0 "$CPID" 2>/dev/null || break
    sleep 0.1
done
[ -f "$T/cluster.txt" ] || { echo "no cluster:"; cat "$T/cluster.err"; exit 1; }
NODES=$(sed -n 1p "$T/cluster.txt")
read -r -a PORTS <<< "$(sed -n 2p "$T/cluster.txt")"
keys() { # the keys held by all masters together
    local n=0 p k
    for p in "${PORTS[@]}"; do
        k=$(redis-cli -p "$p" DBSIZE) || return 1
        n=$((n + k))
    done
    echo "$n"
}

L2="{\"type\": \"resp\", \"cluster\": true, \"nodes\": $NODES}"
mkdir "$T/r1"
(cd "$T/r1" && "$LMCACHE" trace replay "$T/store.lct" $SM --l2-adapter "$L2" --json \
    > out.txt 2> err.txt); rc=$?
[ "$rc" = 0 ] || cat "$T/r1/err.txt"
expect "replay with a cluster L2 adapter exits 0" "$rc"
[ -f "$T/r1/trace_replay_summary.json" ]; expect "replay writes its summary" $?
[ "$(keys)" = 4 ]; _st=$?; expect "the trace's 4 keys are in the cluster ($(keys) found)" $_st

# The same config without "cluster": the seed's INFO cluster says so.
L2_DETECT="{\"type\": \"resp\", \"port\": ${PORTS[1]}, \"key_prefix\": \"detect:\"}"
"$LMCACHE" trace replay "$T/store.lct" $SM --l2-adapter "$L2_DETECT" -q --no-csv \
    --output-dir "$T/r2" > /dev/null 2> "$T/r2.err"; rc=$?
[ "$rc" = 0 ] && [ "$(keys)" = 8 ]
_st=$?; expect "a detected cluster works the same (rc $rc, $(keys) keys)" $_st

err=$("$LMCACHE" trace replay "$T/store.lct" $SM \
    --l2-adapter '{"type": "resp", "cluster": true, "nodes": ["127.0.0.1"]}' 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] && echo "$err" | grep -q "field 'nodes\[0\]' of type 'resp' must be a \"host:port\""
expect "a bad seed exits 2 naming the field" $?

# Nothing listens on the first port once the cluster is gone: the replay is not held up.
stop_cluster
start=$(date +%s)
"$LMCACHE" trace replay "$T/store.lct" $SM --l2-adapter "$L2" -q --no-csv \
    --output-dir "$T/r3" > /dev/null 2> "$T/r3.err"; rc=$?
secs=$(($(date +%s) - start))
[ "$rc" = 0 ] && [ "$secs" -lt 10 ]
expect "replay against a cluster that is down exits 0 without waiting (rc $rc, ${secs} s)" $?

e2e_report test_resp_cluster
