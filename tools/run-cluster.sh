#!/bin/sh
# `make run`: a local cluster in the foreground -- three volumes on ports
# 3001-3003 (mkv-volume, or stock nginx with `make run VOLUMES=nginx`) and a
# master on port 3000, all data under ./data.  Ctrl-C (or SIGTERM) stops
# everything and exits 0: the way to end it, not a failure make reports.
set -e
cd "$(dirname "$0")/.."
kind=${1:-mkv}
[ $# -gt 0 ] && shift
mkdir -p data
pids=""
cleanup() {
	trap - INT TERM EXIT
	kill $pids 2>/dev/null || true   # gone already when Ctrl-C reached them too
	wait 2>/dev/null
	exit "$1"
}
trap 'cleanup $?' EXIT
trap 'cleanup 0' INT TERM
for i in 1 2 3; do
	dir=data/vol$i
	mkdir -p "$dir"
	if [ "$kind" = nginx ]; then
		sh deploy/nginx/mkv-nginx-volume 300$i "$dir" &
	else
		bin/mkv-volume -port 300$i "$dir" &
	fi
	pids="$pids $!"
done
sleep 0.5
for p in $pids; do
	kill -0 "$p" 2>/dev/null || { echo "mkv: a volume failed to start (port in use?)" >&2; exit 1; }
done
bin/mkv -volumes localhost:3001,localhost:3002,localhost:3003 -db data/indexdb \
	-port 3000 "$@" server &
master=$!
pids="$pids $master"
sleep 0.5
kill -0 "$master" 2>/dev/null || { echo "mkv: the master failed to start" >&2; exit 1; }
echo "mkv: master on http://localhost:3000, volumes ($kind) on 3001-3003, data in ./data"
echo "     try: curl -L -X PUT -T README.md localhost:3000/readme; curl -L localhost:3000/readme"
wait
