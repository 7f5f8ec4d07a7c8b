# lib.sh -- what the end-to-end scripts share; source it after `set -u`:
#   . "$(dirname "$0")/lib.sh" "$@"
# It sets LMCACHE and TOOLS (the script's two arguments, made absolute), HERE
# (the scripts' folder), MOONCAKE (the shared Mooncake trace) and T (a fresh
# temporary folder, removed at exit with every process in PIDS killed and
# what at_exit names run), and defines the helpers below. The script ends
# with `e2e_report NAME`.
# Not a test itself: CTest runs tests/e2e/test_*.sh only.

LMCACHE=$(realpath "${1:?usage: $0 lmcache tools-dir}")
TOOLS=$(realpath "${2:?usage: $0 lmcache tools-dir}")
HERE=$(cd "$(dirname "$0")" && pwd)
MOONCAKE="$HERE/../../../shared/traces/mooncake/mooncake_synthetic_trace.jsonl"
T=$(mktemp -d)
PIDS=()
AT_EXIT=()
# at_exit CMD [ARG...]: run CMD at exit, after the processes in PIDS are gone (so a
# mount they write to is no longer busy) and before $T is removed; the last named
# runs first.
at_exit() { AT_EXIT+=("$(printf '%q ' "$@")"); }
e2e_cleanup() {
    local p i
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    for ((i = ${#AT_EXIT[@]} - 1; i >= 0; i--)); do eval "${AT_EXIT[i]}"; done
    rm -rf "$T"
}
trap e2e_cleanup EXIT
pass=0 fail=0

# expect NAME STATUS: counts a check; STATUS 0 passes.
expect() { if [ "$2" = 0 ]; then pass=$((pass + 1)); else echo "FAIL: $1"; fail=$((fail + 1)); fi; }

# expect_rc NAME WANT CMD...: the command exits WANT; its output is in $T/out and $T/err.
expect_rc() {
    local name=$1 want=$2
    shift 2
    "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || echo "  exit $rc, want $want; stderr: $(head -3 "$T/err")"
    expect "$name" $([ "$rc" = "$want" ]; echo $?)
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000))
}

# A value from a JSON file: json_get FILE 'r["a"]["b"]'
json_get() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# start_server PORT LOG [server flags...]: `lmcache server` on PORT in the background,
# its stderr in LOG, its pid in SERVER and in PIDS. Returns 0 once it is listening,
# 1 if it exits first or is not listening within 10 s.
start_server() {
    local port=$1 log=$2
    shift 2
    "$LMCACHE" server --port "$port" "$@" 2> "$log" &
    SERVER=$!
    PIDS+=("$SERVER")
    for _ in $(seq 1 100); do
        grep -q "listening on" "$log" 2>/dev/null && return 0
        kill -0 "$SERVER" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# mooncake_run NAME REQUESTS [server flags...]: a Mooncake workload of REQUESTS
# requests through `lmcache server` (2 workers; log $T/NAME.server.log), driven by
# `lmcache bench server` (2 clients, 100x the recorded speed; its JSON in
# $T/NAME.bench.json); the server stops with SIGTERM. Counts two checks: the bench
# and the server exit 0.
mooncake_run() {
    local name=$1 requests=$2 port server
    shift 2
    port=$(free_port)
    start_server "$port" "$T/$name.server.log" --max-workers 2 "$@"
    server=$SERVER
    "$LMCACHE" bench server --port "$port" --trace "$MOONCAKE" --max-requests "$requests" \
        --time-scale 0.01 --concurrency 2 --bytes-per-token 16 --json > "$T/$name.bench.json" \
        2> "$T/$name.bench.err"
    expect "bench server exits 0 on the $name run" $?
    kill -TERM "$server"
    wait "$server"
    expect "the $name run's server stops cleanly" $?
}

# record_mooncake TRACE REQUESTS [server flags...]: mooncake_run (named record) with
# tracing to TRACE.
record_mooncake() {
    local trace=$1 requests=$2
    shift 2
    mooncake_run record "$requests" --trace-level storage --trace-output "$trace" "$@"
}

# e2e_report NAME: the counts, and the script's exit status.
e2e_report() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" = 0 ]
}

# chromium_render HTML PNG DOM: a screenshot (1200 x 1600) and the DOM of a report in headless
# Chromium, counting three checks (it renders, the screenshot is not blank, the DOM dumps).
# Returns 1 without a check, saying so, when Chromium is not installed (scripts/install-deps
# installs it).
chromium_render() {
    local html=$1 png=$2 dom=$3 chromium
    chromium=$(command -v chromium || command -v chromium-browser || true)
    if [ -z "$chromium" ]; then
        echo "SKIP: chromium is not installed (scripts/install-deps installs it): $html is not rendered"
        return 1
    fi
    local run=(timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic
        --no-first-run --disable-background-networking --disable-component-update --disable-sync)
    "${run[@]}" --user-data-dir="$(mktemp -d -p "$T")" --screenshot="$png" --window-size=1200,1600 \
        "file://$html" > /dev/null 2>> "$T/chromium.err"
    _st=$?; expect "chromium renders $(basename "$html")" $_st
    python3 - "$png" <<'PYEOF'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
i, idat = 8, b""
while i < len(d):
    n, t = struct.unpack(">I4s", d[i:i + 8])
    if t == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", d[i + 8:i + 18])
    elif t == b"IDAT":
        idat += d[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
bpp = {2: 3, 6: 4}[ctype]
stride = w * bpp
# The bytes of every 4th row (filtered or not) tell a blank page from a drawn one.
colours = set()
for y in range(0, h, 4):
    row = raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
    for x in range(0, stride - bpp, bpp * 3):
        colours.add(row[x:x + 3])
assert w == 1200 and h == 1600, (w, h)
assert len(colours) > 40, "blank screenshot: %d distinct values" % len(colours)
PYEOF
    _st=$?; expect "the screenshot of $(basename "$html") is not blank" $_st
    "${run[@]}" --user-data-dir="$(mktemp -d -p "$T")" --dump-dom "file://$html" > "$dom" \
        2>> "$T/chromium.err"
    _st=$?; expect "chromium dumps the DOM of $(basename "$html")" $_st
    return 0
}
