#!/bin/bash
# stopped_volume.sh: a master and two mkv-volumes; one is stopped
# (SIGSTOP: its kernel accepts, nothing answers).  Times a small PUT and
# a DELETE started at once after the stop, and after the volume is
# marked down.  MKV_BIN (default ./bin).
set -u
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
bin=${MKV_BIN:-$root/bin}
t=$(mktemp -d /tmp/atk42s.XXXXXX)
read p1 p2 pm < <(python3 -c "
import socket
ss=[socket.socket() for i in range(3)]
[s.bind(('127.0.0.1',0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])")
"$bin/mkv-volume" -port $p1 "$t/v1" > "$t/v1.log" 2>&1 & v1=$!
"$bin/mkv-volume" -port $p2 "$t/v2" > "$t/v2.log" 2>&1 & v2=$!
sleep 1
"$bin/mkv" -volumes 127.0.0.1:$p1,127.0.0.1:$p2 -db "$t/db" -port $pm -replicas 2 -puttimeout 600s ${MASTER_OPTS:-} server > "$t/master.log" 2>&1 & m=$!
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$pm/" && break; sleep 0.1; done
for k in a b c d; do curl -s -o /dev/null -X PUT --data-binary hi "http://127.0.0.1:$pm/$k"; done
kill -STOP $v2
# -puttimeout is 600 s (below): a request that waits for it is the finding
curl -s -m 60 -o /dev/null -w "PUT right after the stop: %{http_code} in %{time_total} s\n" -X PUT --data-binary hi "http://127.0.0.1:$pm/new1" > "$t/put.out" &
cp=$!
curl -s -m 60 -o /dev/null -w "DELETE right after the stop: %{http_code} in %{time_total} s\n" -X DELETE "http://127.0.0.1:$pm/a" > "$t/del.out" &
cd=$!
sleep 0.3
curl -s -o /dev/null -w "PUT of the DELETEd key (its lock): %{http_code} in %{time_total} s\n" -X PUT --data-binary hi "http://127.0.0.1:$pm/a"
wait $cp; wait $cd; rc=$?
cat "$t/put.out" "$t/del.out"
[ $rc = 0 ] || echo "FAIL: the DELETE was not answered within 60 s of its volume's stop (curl $rc): it waits for -puttimeout"
curl -s -o /dev/null -w "DELETE after marked down: %{http_code} in %{time_total} s\n" -X DELETE "http://127.0.0.1:$pm/b"
kill -CONT $v2; kill $m; sleep 1; kill $v1 $v2; wait 2>/dev/null
grep -v " is up\| runs " "$t/master.log" | tail -6
grep -l "AddressSanitizer\|runtime error\|LeakSanitizer" "$t"/*.log && { grep -h -A12 "AddressSanitizer\|runtime error\|LeakSanitizer" "$t"/*.log | head -40; rc=1; }
rm -rf "$t"
exit $rc
