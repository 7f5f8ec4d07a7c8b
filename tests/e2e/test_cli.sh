#!/usr/bin/env bash
# The lmcache command's dispatch: help, version, unknown commands and flags.
# Usage: test_cli.sh path/to/lmcache
set -u
LMCACHE=${1:?usage: $0 path/to/lmcache}
pass=0 fail=0

check() { # name expected_rc actual_rc [condition-result]
    if [ "$2" = "$3" ] && [ "${4:-0}" = 0 ]; then
        pass=$((pass + 1))
    else
        echo "FAIL: $1 (rc $3, wanted $2)"
        fail=$((fail + 1))
    fi
}

out=$("$LMCACHE" --help 2>&1); rc=$?
echo "$out" | grep -q "server" && echo "$out" | grep -q "trace" && echo "$out" | grep -q "bench"
check "--help names server, trace and bench" 0 $rc $?

out=$("$LMCACHE" --version 2>&1); rc=$?
echo "$out" | grep -Eq '^lmcache [0-9]+\.[0-9]+\.[0-9]+$'
check "--version prints the version" 0 $rc $?

err=$("$LMCACHE" nosuchcommand 2>&1 >/dev/null); rc=$?
echo "$err" | grep -q "unknown command 'nosuchcommand'"
check "an unknown command exits 2 with a message" 2 $rc $?

err=$("$LMCACHE" --bogus 2>&1 >/dev/null); rc=$?
echo "$err" | grep -q "unknown option '--bogus'"
check "an unknown flag exits 2 with a message" 2 $rc $?

"$LMCACHE" >/dev/null 2>&1; rc=$?
check "no command exits 2" 2 $rc

for sub in server trace bench "trace info" "trace replay" "trace record" "bench micro" "bench server"; do
    # shellcheck disable=SC2086
    "$LMCACHE" $sub --help >/dev/null 2>&1; rc=$?
    check "'$sub --help' exits 0" 0 $rc
done

err=$("$LMCACHE" trace nosuch 2>&1 >/dev/null); rc=$?
echo "$err" | grep -q "unknown command 'nosuch'"
check "an unknown trace subcommand exits 2" 2 $rc $?

out=$("$LMCACHE" trace record 2>&1); rc=$?
echo "$out" | grep -q "lmcache server" && echo "$out" | grep -q -- "--trace-level storage"
check "trace record points at the server flag and exits 2" 2 $rc $?

err=$("$LMCACHE" bench micro --bogus 2>&1 >/dev/null); rc=$?
check "bench micro rejects an unknown flag" 2 $rc

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
