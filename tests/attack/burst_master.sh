#!/bin/bash
# burst_master.sh ROUNDS N: a master and two nginx volumes with the
# keep-alive limits given (KA_REQUESTS, KA_TIMEOUT, CONNS: nginx's
# keepalive_requests, keepalive_timeout, worker_connections), burst.py
# against it.  MKV_BIN (default ./bin).
set -u
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
bin=${MKV_BIN:-$root/bin}
t=$(mktemp -d /tmp/atk42b.XXXXXX)
mkdir "$t/ng"
cp "$root/deploy/nginx/mkv-nginx-volume" "$t/ng/"
sed "/^http {/a\\	keepalive_requests ${KA_REQUESTS:-1000};\\n\\tkeepalive_timeout ${KA_TIMEOUT:-75s};" "$root/deploy/nginx/nginx.conf.in" > "$t/ng/nginx.conf.in"
read p1 p2 pm < <(python3 -c "
import socket
ss=[socket.socket() for i in range(3)]
[s.bind(('127.0.0.1',0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])")
pids=()
for p in $p1 $p2; do
	MKV_NGINX_CONNECTIONS=${CONNS:-768} setsid sh "$t/ng/mkv-nginx-volume" $p "$t/v$p" > "$t/v$p.log" 2>&1 &
	pids+=($!)
done
sleep 1
setsid "$bin/mkv" -volumes 127.0.0.1:$p1,127.0.0.1:$p2 -db "$t/db" -port $pm -replicas 2 ${MASTER_OPTS:-} server > "$t/master.log" 2>&1 &
mpid=$!
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$pm/" && break; sleep 0.1; done
grep -n "keepalive" "$t/v$p1/.nginx/nginx.conf" | head -3
python3 "$here/burst.py" 127.0.0.1:$pm $mpid "$@"; rc=$?
kill -TERM $mpid; sleep 1
for p in "${pids[@]}"; do kill -TERM -- -$p 2>/dev/null || kill -TERM $p; done
wait 2>/dev/null
echo "--- master.log (errors)"; grep -v " is up\| runs " "$t/master.log" | tail -8
grep -l "AddressSanitizer\|runtime error\|LeakSanitizer" "$t"/*.log && { grep -h -A12 "AddressSanitizer\|runtime error\|LeakSanitizer" "$t"/*.log | head -40; rc=1; }
rm -rf "$t"
exit $rc
