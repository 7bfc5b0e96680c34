#!/bin/bash
# resolver_master.sh PHASES...: a master whose volumes are named by host
# name (vol1.mkv.test, vol2.mkv.test), in a mount namespace of its own
# whose /etc/resolv.conf names tests/attack/dns.py.  Each phase is
# "SECONDS MODE..." (dns.py's mode file) run under probe.py.  Root only.
# MKV_BIN (default ./bin), KIND=mkv|nginx, MASTER_OPTS.
set -u
[ "$(id -u)" = 0 ] || { echo "skipped: not root"; exit 77; }
if [ -z "${ATK_IN_NS:-}" ]; then
	exec env ATK_IN_NS=1 unshare -m "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
bin=${MKV_BIN:-$root/bin}
t=$(mktemp -d /tmp/atk42.XXXXXX)
dnsaddr=127.42.$(( $$ % 250 )).53
mount --make-rprivate /
printf 'nameserver %s\noptions timeout:30 attempts:1\n' "$dnsaddr" > "$t/resolv.conf"
mount --bind "$t/resolv.conf" /etc/resolv.conf
echo "${INIT_MODE:-answer 127.0.0.1}" > "$t/mode"
python3 "$here/dns.py" "$dnsaddr" "$t/mode" & dnspid=$!
p1=$(python3 -c "import socket
for p in range(30000+$$%9000*3,65000,3):
  try:
    ss=[socket.socket() for i in range(3)]
    [s.bind((\"127.0.0.1\",p+i)) for i,s in enumerate(ss)]
    print(p); break
  except OSError: pass"); p2=$((p1 + 1)); pm=$((p1 + 2))
pids=()
start_vol() {  # port dir
	if [ "${KIND:-mkv}" = nginx ]; then
		MKV_NGINX_CONNECTIONS=${CONNS:-768} setsid sh "$root/deploy/nginx/mkv-nginx-volume" "$1" "$2" > "$2.log" 2>&1 &
	else
		setsid "$bin/mkv-volume" -port "$1" "$2" > "$2.log" 2>&1 &
	fi
	pids+=($!)
}
start_vol $p1 "$t/v1"; start_vol $p2 "$t/v2"
sleep 1
setsid "$bin/mkv" -volumes vol1.mkv.test:$p1,vol2.mkv.test:$p2 -db "$t/db" -port $pm -replicas 2 ${MASTER_OPTS:-} server > "$t/master.log" 2>&1 &
mpid=$!
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$pm/" && break; sleep 0.1; done
for k in k1 k2 k3 k4; do curl -s -o /dev/null -w "PUT $k %{http_code}\n" -X PUT --data-binary hello "http://127.0.0.1:$pm/$k"; done
cleanup() {
	kill -TERM $mpid 2>/dev/null; sleep 1
	for p in "${pids[@]}"; do kill -TERM -- -$p 2>/dev/null || kill -TERM $p; done
	kill $dnspid 2>/dev/null
	wait 2>/dev/null
	echo "--- master.log (tail)"; grep -v " is up\| runs " "$t/master.log" | tail -8
	grep -h -A12 "AddressSanitizer\\|runtime error\\|LeakSanitizer" "$t"/*.log | head -40
	rm -rf "$t"
}
trap cleanup EXIT
rc=0
for phase in "$@"; do
	secs=${phase%% *}; mode=${phase#* }
	echo "=== phase: $secs s, dns: $mode   (fds: $(ls /proc/$mpid/fd | wc -l), rss: $(awk '/VmRSS/{print $2}' /proc/$mpid/status) kB)"
	echo "$mode" > "$t/mode"
	[ "${RESTART_VOLS:-0}" = 1 ] && { for p in "${pids[@]}"; do kill -TERM -- -$p 2>/dev/null; done; wait "${pids[@]}" 2>/dev/null; pids=(); sleep 0.5; start_vol $p1 "$t/v1"; start_vol $p2 "$t/v2"; sleep 1; }
	python3 "$here/probe.py" 127.0.0.1:$pm "$secs" k1 k2 k3 k4 || rc=1
done
echo "dns queries: $(wc -l < "$t/mode.log")"
exit $rc
