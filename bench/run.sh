#!/bin/bash
# bench/run.sh [--quick] -- `make bench`: mkv's hot paths side by side with
# stock nginx, on loopback, as ratios; one table printed and written to
# bench/results.md (with the machine, the versions, the date and the mode).
#
# Every figure is the median of RUNS runs with min-max; ours and the
# reference alternate run by run (A B A B ...) so that drift hits both.
# Clusters are started here on free loopback ports, with data in a mktemp -d
# directory, and always stopped and removed on exit.  Nothing here asserts:
# a missed target is a row that says "no".
#
# Full run: 3 runs of 2 s per side for the rate rows, 3 runs of a 1 GiB
# PUT (row 4) and of rebuild + rebalance over 100,000 keys on mkv-volumes
# and on nginx (row 7), each with the same requests made straight, 3 runs
# of mkv put vs curl of 20,000 files (row 8), the S3 rows (9: a 1 GiB
# multipart upload and 100,000 keys listed), a 20,000-key upload (row 10);
# 37 minutes here under a load average of 20-29 before rows 8 and 9 were
# added, most of it row 7.
# --quick: 3 runs of 1 s, 128 MiB, 2,000 keys, 2,000 files (under 2 minutes quiet).  How long either takes
# depends mostly on how fast `mkv rebuild` and `mkv rebalance` are (row 7).
#
# Environment: BENCH_BIN=DIR takes mkv, mkv-volume and loadgen from DIR
# (default bin/); BENCH_KEEP=1 keeps the temporary directory (logs);
# BENCH_ROWS="3 10" runs only those rows (1 stands for 1-2); BENCH_GO=DIR
# adds row 11, minikeyvalue's own load tool against mkv and against the Go
# original side by side: DIR holds the Go `mkv` and its tools/thrasher.go
# built as `thrasher` (which talks to localhost:3000, so port 3000 must be
# free), and row 13, rebuild and rebalance 5 -> 3 against the Go `mkv`
# (GO_KEYS keys, default 20000; GO_ROUNDS rounds, default 3, alternating,
# on the same volumes).  BENCH_OLD_MKV=BIN: row 15e's reference, `mkv get`
# of that binary.  SCALE=1 adds row 17 (big indexes: see there).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD

QUICK=0
case "${1:-}" in
--quick) QUICK=1 ;;
"") ;;
-h | --help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "usage: bench/run.sh [--quick]" >&2; exit 2 ;;
esac
if [ $QUICK = 1 ]; then
	MODE=quick RUNS=3 RUNS_BIG=3 DUR=1 BIG_MB=128 KEYS=2000 DS_KEYS=2000 THRASH=1
else
	MODE=full RUNS=3 RUNS_BIG=3 DUR=2 BIG_MB=1024 KEYS=100000 DS_KEYS=20000 THRASH=3
fi
# want ROW: was the row asked for (BENCH_ROWS, default all)?
want() { [ -z "${BENCH_ROWS:-}" ] || [[ " $BENCH_ROWS " == *" $1 "* ]]; }
CONC=16          # clients for the loadgen rows (3, 5 and 8)
SMALL=1024       # bytes per value in rows 3 and 7
WRK="wrk -t2 -c100"

for t in wrk nginx curl; do
	command -v $t >/dev/null || { echo "bench: $t not installed (make deps)" >&2; exit 1; }
done
# BENCH_BIN: where mkv, mkv-volume and loadgen are (default bin/).
BIN=${BENCH_BIN:-$ROOT/bin}
[ -x "$BIN/loadgen" ] || make -s bin/loadgen || exit 1
# A binary counts once it answers -h with its usage (not a placeholder).
usable() { [ -x "$1" ] && "$1" -h 2>&1 | grep -qi usage; }
HAVE_MKV=0; usable "$BIN/mkv" && HAVE_MKV=1
HAVE_VOL=0; usable "$BIN/mkv-volume" && HAVE_VOL=1

# The source the binaries were built from, taken now: the tree may move on
# while the run lasts.
REV=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- master volume common 2>/dev/null || echo "+changes")
[ -n "${BENCH_BIN:-}" ] && REV="binaries from $BENCH_BIN (tree at $REV)"

T=$(mktemp -d "${TMPDIR:-/tmp}/mkv-bench.XXXXXX") || exit 1
SAMPLES=$T/samples
: >"$SAMPLES"
PIDS=""

cleanup() {
	trap - EXIT INT TERM
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	if [ -n "${BENCH_KEEP:-}" ]; then echo "bench: kept $T" >&2; return; fi
	# Row 7's 300,000 files: one rm per subvolume, 16 at once (each unlink
	# waits for the disk's discard here).
	ls -d "$T"/r7/vols/v*/* 2>/dev/null | xargs -r -P 16 -n 1 rm -rf
	rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM

log() { printf '%s  %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# FREE = a port in 20000-32767 (below the ephemeral range) that nobody
# listens on and that this script has not handed out before.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12768))
		case " $USED_PORTS " in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			USED_PORTS="$USED_PORTS $p"
			FREE=$p
			return
		fi
	done
}
USED_PORTS=""

# Wait until something accepts connections on the port (10 s at most).
wait_port() {
	local i
	for i in $(seq 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	log "nothing listens on port $1"
	return 1
}

# Start a background process; LAST = its pid.  Output goes to $T/NAME.log.
spawn() {
	local name=$1
	shift
	"$@" >>"$T/$name.log" 2>&1 &
	LAST=$!
	PIDS="$PIDS $LAST"
}

stop() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	PIDS=$(echo "$PIDS" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user root root;"

# nginx_start TEMPLATE NAME PORT [sed expressions...]: nginx in the
# foreground with its own config, logs and temp paths under $T/NAME.
nginx_start() {
	local tmpl=$1 name=$2 port=$3 d=$T/$2
	shift 3
	mkdir -p "$d/data"
	sed -e "s|@USER@|$USER_LINE|" -e "s|@DIR@|$d|g" -e "s|@DATA@|$d/data|g" \
		-e "s|@PORT@|$port|g" "$@" "bench/$tmpl" >"$d/nginx.conf"
	spawn "$name" nginx -e "$d/error.log" -p "$d" -c "$d/nginx.conf"
	wait_port "$port"
}

# A volume of our kind when $BIN/mkv-volume exists (VOL_FLAGS: more
# flags), else nginx.
volume_start() {
	local name=$1 port=$2 dir=${3:-$T/$1/data}
	mkdir -p "$dir"
	if [ $HAVE_VOL = 1 ]; then
		spawn "$name" "$BIN/mkv-volume" -port "$port" ${VOL_PEERS:+-peers "$VOL_PEERS"} ${VOL_FLAGS:-} "$dir"
		wait_port "$port"
	else
		nginx_start nginx-volume.conf.in "$name" "$port" -e "s|$T/$name/data|$dir|g"
	fi
}

# master_start NAME PORT VOLUMES REPLICAS: a master on a fresh index
# (MASTER_FLAGS: more flags).
# Ready once it accepts a PUT (it needs to have seen its volumes up).
master_start() {
	local name=$1 port=$2 vols=$3 rep=$4 i
	rm -rf "$T/$name.db"
	spawn "$name" "$BIN/mkv" -volumes "$vols" -db "$T/$name.db" -port "$port" \
		-replicas "$rep" -subvolumes 10 ${MASTER_FLAGS:-} server
	wait_port "$port" || return 1
	for i in $(seq 100); do
		case $(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary x \
			"http://127.0.0.1:$port/bench/probe") in
		201 | 403) curl -s -o /dev/null -X DELETE "http://127.0.0.1:$port/bench/probe"; return 0 ;;
		esac
		sleep 0.1
	done
	log "master $name never accepted a PUT"
	return 1
}

# record ROW SIDE VALUE
record() { [ -n "$3" ] && echo "$1 $2 $3" >>"$SAMPLES"; }

# wrk_rate URL [allow-non-2xx]: requests/s, or nothing when wrk failed or
# (without the flag) some answer was not 2xx/3xx.
wrk_rate() {
	local out
	out=$($WRK -d"${DUR}s" "$1" 2>&1)
	if [ -z "${2:-}" ] && echo "$out" | grep -q 'Non-2xx'; then
		log "wrk $1: $(echo "$out" | grep Non-2xx)"
		return
	fi
	echo "$out" | grep -q 'Socket errors' && log "wrk $1: $(echo "$out" | grep 'Socket errors')"
	echo "$out" | awk '/^Requests\/sec:/ { print $2 }'
}

# lg_field FIELD loadgen-args...: one field of loadgen's answer.  Failed
# requests are logged and counted in LG_ERRORS (the rate still counts only
# the cycles that went right); nothing when loadgen gave no answer.
lg_field() {
	local f=$1 out
	shift
	out=$("$BIN/loadgen" "$@" 2>"$T/loadgen.err")
	[ -n "${LG_TAG:-}" ] && echo "$LG_TAG $out" >>"$T/lg.log"
	case $out in
	*errors=0) ;;
	*errors=*) log "loadgen $1 ${*: -1}: $(echo "$out" | sed 's/.*errors=//') failed, e.g. $(head -1 "$T/loadgen.err")"
		echo "$1 ${*: -1}: $(echo "$out" | sed 's/.*errors=//') failed, e.g. $(head -1 "$T/loadgen.err")" >>"$T/errors" ;;
	*) log "loadgen $*: no answer: $(tail -1 "$T/loadgen.err")"; return ;;
	esac
	echo "$out" | tr ' ' '\n' | sed -n "s/^$f=//p"
}

# ---------------------------------------------------------------- clusters
log "bench ($MODE) in $T; mkv: $([ $HAVE_MKV = 1 ] && echo yes || echo missing)," \
	"mkv-volume: $([ $HAVE_VOL = 1 ] && echo yes || echo "missing (nginx volumes instead)")"

# Cluster A: three volumes of ours + a master with 3 replicas.
VA=""
for i in 1 2 3; do
	free_port; p=$FREE
	volume_start "va$i" "$p" || exit 1
	VA="${VA:+$VA,}127.0.0.1:$p"
done
# NV: one stock nginx volume, the reference for rows 5 and 6; with NV2 and
# NV3 (NVS), the three nginx volumes of rows 3, 4 and 8.
free_port; NVP=$FREE
nginx_start nginx-volume.conf.in nv "$NVP" || exit 1
NV=http://127.0.0.1:$NVP
NVS="127.0.0.1:$NVP"
for i in 2 3; do
	free_port; p=$FREE
	nginx_start nginx-volume.conf.in "nv$i" "$p" || exit 1
	NVS="$NVS,127.0.0.1:$p"
done

MA="" MB=""
if [ $HAVE_MKV = 1 ]; then
	free_port; MAP=$FREE
	master_start ma "$MAP" "$VA" 3 && MA=http://127.0.0.1:$MAP
	MAPID=$LAST
	# Master B: 3 replicas on the three nginx volumes, which loadgen also
	# drives straight for the volume limit.
	free_port; MBP=$FREE
	master_start mb "$MBP" "$NVS" 3 && MB=http://127.0.0.1:$MBP
	MBPID=$LAST
fi

# ------------------------------------------------------- rows 1-2: redirects
LOC="http://127.0.0.1:1/3e/d1/L2hlbGxv" MD5=5d41402abc4b2a76b9719d911017c592 KV="$VA"
if [ -n "$MA" ]; then
	curl -s -o /dev/null -X PUT --data-binary hello "$MA/bench/hot"
	hdr=$(curl -s -D - -o /dev/null "$MA/bench/hot" | tr -d '\r')
	LOC=$(echo "$hdr" | sed -n 's/^[Ll]ocation: //p')
	MD5=$(echo "$hdr" | sed -n 's/^[Cc]ontent-[Mm]d5: //p')
	KV=$(echo "$hdr" | sed -n 's/^[Kk]ey-[Vv]olumes: //p')
	echo "$hdr" | head -1 | grep -q ' 302' || log "master GET /bench/hot: $(echo "$hdr" | head -1)"
fi
free_port; RP=$FREE
nginx_start nginx-302.conf.in n302 "$RP" -e "s|@LOCATION@|$LOC|" -e "s|@MD5@|$MD5|" \
	-e "s|@VOLUMES@|$KV|" || exit 1
R302PID=$LAST
R302=http://127.0.0.1:$RP

want 1 && log "rows 1-2: GET -> 302 / 404, $RUNS x ${DUR}s each side"
want 1 && for r in $(seq "$RUNS"); do
	[ -n "$MA" ] && record r1 ours "$(wrk_rate "$MA/bench/hot")"
	record r1 ref "$(wrk_rate "$R302/bench/hot")"
	[ -n "$MA" ] && record r2 ours "$(wrk_rate "$MA/bench/missing" allow)"
	record r2 ref "$(wrk_rate "$R302/bench/missing")"
done
stop "$R302PID"

# ------------------------------------------------- row 3: small-value cycle
# The master's cycle (PUT, GET following the redirect, DELETE) against the
# volume limit: the same volume requests -- each replica's PUT, one GET,
# each replica's DELETE -- made straight by loadgen with as many clients.
# direct LG_TAG VOLUMES: loadgen direct's rate on those volumes.
direct() { LG_TAG=$1 lg_field rate direct -c $CONC -d $DUR -s $SMALL -volumes "$2" -replicas 3 -subvolumes 10; }
if want 3; then
	log "row 3: PUT/GET/DELETE cycle vs the volume limit, $CONC clients, $SMALL B, $RUNS x ${DUR}s each side"
	for r in $(seq "$RUNS"); do
		[ -n "$MB" ] && record r3 ours "$(LG_TAG=3a lg_field rate cycle -c $CONC -d $DUR -s $SMALL "$MB")"
		record r3 ref "$(direct 3a-direct "$NVS")"
		[ -n "$MA" ] && record r3b ours "$(LG_TAG=3b lg_field rate cycle -c $CONC -d $DUR -s $SMALL "$MA")"
		record r3b ref "$(direct 3b-direct "$VA")"
	done
fi

# ------------------------------------------------- row 10: dataset upload
# DS_KEYS PUTs of 4 KiB by CONC clients through the master (3 replicas on
# the nginx volumes) against the same PUTs made straight to the volumes.
if want 10; then
	log "row 10: upload of $DS_KEYS keys of 4 KiB, $CONC clients, $RUNS runs each side"
	for r in $(seq "$RUNS"); do
		[ -n "$MB" ] && record r10 ours "$(LG_TAG=10 lg_field rate put -c $CONC -n $DS_KEYS -s 4096 -p /bench/ds$r "$MB")"
		record r10 ref "$(LG_TAG=10-direct lg_field rate populate -c $CONC -n $DS_KEYS -s 4096 \
			-volumes "$NVS" -replicas 3 -subvolumes 10 -p /bench/dsd$r)"
	done
fi

# ---------------------------------------- row 5: GET 1 MiB through redirect
NBIG=32
want 5 && log "row 5: GET 1 MiB via redirect, $CONC clients, $RUNS x ${DUR}s each side"
want 5 && lg_field rate put -c 8 -n $NBIG -s 1048576 -p /bench/big "$NV" >/dev/null
want 5 && [ -n "$MA" ] && lg_field rate put -c 8 -n $NBIG -s 1048576 -p /bench/big "$MA" >/dev/null
want 5 && for r in $(seq "$RUNS"); do
	[ -n "$MA" ] && record r5 ours "$(lg_field mibps get -c $CONC -d $DUR -n $NBIG -p /bench/big "$MA")"
	record r5 ref "$(lg_field mibps get -c $CONC -d $DUR -n $NBIG -p /bench/big "$NV")"
done
# -------------------------------------------------- row 4: one large PUT
# put_big URL: wall seconds of one curl -T of the big file; nothing unless
# 201/204.  Then the blob is deleted and the page cache written back, so
# that one side's dirty pages are not flushed during the other's run.
put_big() {
	local out
	out=$(curl -sS -o /dev/null -w '%{http_code} %{time_total}' -T "$T/big" "$1" 2>&1)
	case $out in
	201\ * | 204\ *) echo "${out#* }" ;;
	*) log "PUT $1: $out" ;;
	esac
	curl -s -o /dev/null -X DELETE "$1"
	sync
}
# big_master URL PID ROW SIDE: one PUT through a running master; records
# the wall time (ROW) and the master's peak RSS during it (ROW.rss, MiB:
# VmHWM, reset just before through clear_refs).
big_master() {
	local wall
	echo 5 >"/proc/$2/clear_refs" 2>/dev/null
	wall=$(put_big "$1/bench/large")
	[ -n "$wall" ] || return
	record "$3" "$4" "$wall"
	record "$3.rss" "$4" "$(awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$2/status")"
}
# On the nginx volumes (NVS) the master's streaming is seen without fsync
# (nginx never fsyncs; mkv-volume does).
M4=""
if want 4; then
log "row 4: PUT of $BIG_MB MiB, $RUNS_BIG runs of each"
head -c "$((BIG_MB * 1048576))" /dev/urandom >"$T/big"
fi
if want 4 && [ -n "$MA" ]; then
	# Fresh masters, so that each one's peak RSS is its PUT's.
	for m in "m43 $VA 3" "m41 $VA 1" "m43n $NVS 3" "m41n $NVS 1"; do
		set -- $m
		free_port; p=$FREE
		master_start "$1" "$p" "$2" "$3" || { M4=""; break; }
		M4="$M4 http://127.0.0.1:$p $LAST"
	done
fi
want 4 && for r in $(seq "$RUNS_BIG"); do
	if [ -n "$M4" ]; then
		set -- $M4
		big_master "$1" "$2" r4 ours
		big_master "$3" "$4" r4 ref
		big_master "$5" "$6" r4n ours
		big_master "$7" "$8" r4n ref
	fi
	record r4c ref "$(put_big "$NV/bench/large")"
done
rm -f "$T/big"
# Row 4c compares the 3-replica PUT with one curl -T to nginx.
grep '^r4 ours ' "$SAMPLES" | sed 's/^r4 /r4c /' >>"$SAMPLES"

# ------------------------------------------- row 14: signed requests (-keys)
# A master with -keys on cluster A's volumes (3 replicas).  14a: a signed
# GET -> 302 (one curl --aws-sigv4 signature replayed by wrk: the master
# checks it on every request) vs master A's unsigned GET.  14b: a PUT of
# BIG_MB through S3 with its x-amz-content-sha256, which the master hashes
# as the body streams (curl --aws-sigv4 -H x-amz-content-sha256) vs the same
# S3 PUT unsigned (UNSIGNED-PAYLOAD) on master A.  14c: curl --aws-sigv4 -T
# on the native API (the body unsigned, curl 7.88) vs plain curl -T.
MK=""
if want 14 && [ -n "$MA" ]; then
	KSEC=$(openssl rand -hex 16)
	printf 'bench %s read,list,write,delete /\nanonymous read,write,delete /bench/probe\n' \
		"$KSEC" >"$T/keys"
	chmod 600 "$T/keys"
	free_port; MKP=$FREE
	MASTER_FLAGS="-keys $T/keys" master_start mk "$MKP" "$VA" 3 && MK=http://127.0.0.1:$MKP
	MKPID=$LAST
fi
if [ -n "$MK" ]; then
	SIG=(--aws-sigv4 aws:amz:us-east-1:s3 --user "bench:$KSEC")
	log "row 14: signed GET -> 302 and PUT of $BIG_MB MiB, -keys vs none, $RUNS runs each side"
	printf hello >"$T/hello"
	curl -s -o /dev/null "${SIG[@]}" -T "$T/hello" "$MK/bench/hot"
	curl -s -o /dev/null -T "$T/hello" "$MA/bench/hot"
	hd=$(curl -sv -o /dev/null "${SIG[@]}" "$MK/bench/hot" 2>&1 | tr -d '\r')
	AUTH=$(echo "$hd" | sed -n 's/^> Authorization: //p')
	XD=$(echo "$hd" | sed -n 's/^> X-Amz-Date: //p')
	echo "$hd" | grep -q '^< HTTP/1.1 302' || log "signed GET $MK/bench/hot: $(echo "$hd" | grep '^< HTTP')"
	for r in $(seq "$RUNS"); do
		record r14a ours "$($WRK -d"${DUR}s" -H "Authorization: $AUTH" -H "X-Amz-Date: $XD" \
			"$MK/bench/hot" 2>&1 | awk '/^Requests\/sec:/ { print $2 }')"
		record r14a ref "$(wrk_rate "$MA/bench/hot")"
	done
	head -c "$((BIG_MB * 1048576))" /dev/urandom >"$T/big14"
	SHA=$(sha256sum "$T/big14" | cut -d' ' -f1)
	# put14 URL CURL-ARGS...: wall seconds of a PUT of big14 (200/201), then DELETE
	put14() {
		local u=$1 out
		shift
		out=$(curl -sS -o /dev/null -w '%{http_code} %{time_total}' -T "$T/big14" "$@" "$u" 2>&1)
		case $out in
		20[01]\ *) echo "${out#* }" ;;
		*) log "PUT $u: $out" ;;
		esac
		curl -s -o /dev/null "${SIG[@]}" -X DELETE "$u"
		curl -s -o /dev/null -X DELETE "$u"
		sync
	}
	for r in $(seq "$RUNS_BIG"); do
		record r14b ours "$(put14 "$MK/b14/large" "${SIG[@]}" -H "x-amz-content-sha256: $SHA")"
		record r14b ref "$(put14 "$MA/b14/large" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")"
		record r14c ours "$(put14 "$MK/bench/large14" "${SIG[@]}")"
		record r14c ref "$(put14 "$MA/bench/large14")"
	done
	rm -f "$T/big14"
	stop "$MKPID"
fi
# Masters are done: the volume rows run alone.
if [ -n "$M4" ]; then
	set -- $M4
	stop "$2"; stop "$4"; stop "$6"; stop "$8"
fi
# ------------------------------- row 8: mkv put, and verify on either volume
# 8a: a tree of 4 KiB files into cluster A (3 replicas on mkv-volumes, each
# write fsynced) by `mkv put` vs what scripts do, one `curl -T` per file
# through xargs -P16; files/s, each run to a new prefix.  8b: `mkv verify`
# over the same keys on mkv-volumes (hashed on the volume) vs on three nginx
# volumes (streamed to verify); keys/s from verify's summary.
if want 8 && [ -n "$MA" ]; then
	NPUT=$([ $QUICK = 1 ] && echo 2000 || echo 20000)
	log "row 8: $NPUT files of 4 KiB: mkv put vs xargs -P16 curl -T, $RUNS_BIG runs each; verify"
	mkdir -p "$T/r8/files"
	head -c $((NPUT * 4096)) /dev/urandom | (cd "$T/r8/files" && split -b 4096 -d -a 6 - f)
	rate8() { # rate8 N T0 T1: files/s
		echo "$1 $2 $3" | awk '{ printf "%.0f", $1 / ($3 - $2) }'
	}
	for r in $(seq "$RUNS_BIG"); do
		t0=$(date +%s.%N)
		if "$BIN/mkv" -master "127.0.0.1:$MAP" -workers 16 put "$T/r8/files" "/bench/p$r" \
			>"$T/r8-put.out" 2>&1; then
			record r8 ours "$(rate8 "$NPUT" "$t0" "$(date +%s.%N)")"
		else
			log "mkv put failed: $(tail -1 "$T/r8-put.out")"
		fi
		t0=$(date +%s.%N)
		if (cd "$T/r8/files" && ls | xargs -P16 -I{} curl -sf -o /dev/null -T {} "$MA/bench/c$r/{}"); then
			record r8 ref "$(rate8 "$NPUT" "$t0" "$(date +%s.%N)")"
		else
			log "xargs curl -T: some PUT failed"
		fi
	done
	PUT_SUMMARY=$(tail -1 "$T/r8-put.out")
	free_port; M8P=$FREE
	if master_start m8n "$M8P" "$NVS" 3; then
		M8PID=$LAST
		"$BIN/mkv" -master "127.0.0.1:$M8P" put "$T/r8/files" /bench/p1 >/dev/null 2>&1
		vrate() { # vrate HOST:PORT VOLUMES: keys/s of one verify
			"$BIN/mkv" -volumes "$2" -replicas 3 -subvolumes 10 -master "$1" verify 2>&1 |
				tail -1 | sed -n 's/.*(\([0-9]*\) keys\/s.*/\1/p'
		}
		for r in $(seq "$RUNS_BIG"); do
			record r8v ours "$(vrate "127.0.0.1:$MAP" "$VA")"
			record r8v ref "$(vrate "127.0.0.1:$M8P" "$NVS")"
		done
		stop "$M8PID"
	fi
	rm -rf "$T/r8"
fi

# ------------------------------------------ row 15: a training job's reads
# N15 files of 64 KiB and of 1 MiB, put by `mkv put` into master B (3
# replicas on the 3 nginx volumes); then every key read by 8 threads
# (bench/read15.py): tools/mkvread.py, its listing timed too, vs the same
# volume URLs fetched straight (15a, 15c) and vs each key through the
# master's 302 (15b, 15d), http.client kept alive there; 15l: vs the same
# URLs through the module's own connections, straight.  15e: `mkv get` of
# the 64 KiB files vs the mkv named by BENCH_OLD_MKV (a binary from before
# ?list&locations; without it the row has no reference), each get into a
# directory of its own and nothing deleted until the row ends: this
# disk's ext4 (no journal) passes over every inode freed in the last
# minute (5 while its block is dirty) for each file it makes, which took
# most of a get made after deleting the last one's 2,000 files.
if want 15 && [ -n "$MB" ] && [ -x /usr/bin/python3 ]; then
	N15=2000
	log "row 15: $N15 files of 64 KiB and of 1 MiB read by 8 threads, mkvread vs straight vs the 302; mkv get; $RUNS runs"
	for sz in 64 1024; do
		mkdir -p "$T/r15/f$sz"
		head -c $((N15 * sz * 1024)) /dev/urandom | (cd "$T/r15/f$sz" && split -b $((sz * 1024)) -d -a 6 - f)
		"$BIN/mkv" -master "127.0.0.1:$MBP" put "$T/r15/f$sz" "/r15/s$sz" >>"$T/r15.log" 2>&1 ||
			log "row 15: mkv put failed (see $T/r15.log)"
	done
	r15() { /usr/bin/python3 bench/read15.py "$1" "$MB" "/r15/s$2/" 8 2>>"$T/r15.log"; }
	get15() { # get15 MKV DIR: files/s of one `mkv get` of the 64 KiB files into DIR
		local t0
		t0=$(date +%s.%N)
		"$1" -master "127.0.0.1:$MBP" get /r15/s64 "$2" >>"$T/r15.log" 2>&1 &&
			echo "$N15 $t0 $(date +%s.%N)" | awk '{ printf "%.0f", $1 / ($3 - $2) }'
	}
	for r in $(seq "$RUNS"); do
		m=$(r15 module 64)
		record r15a ours "$m"
		record r15b ours "$m"
		record r15a ref "$(r15 direct 64)"
		record r15b ref "$(r15 redirect 64)"
		m=$(r15 module 1024)
		record r15c ours "$m"
		record r15d ours "$m"
		record r15c ref "$(r15 direct 1024)"
		record r15d ref "$(r15 redirect 1024)"
		record r15l ours "$m"
		record r15l ref "$(r15 pool 1024)"
		# alternating: the first get after the put meets its dirty pages
		for side in $([ $((r % 2)) = 1 ] && echo "ours ref" || echo "ref ours"); do
			if [ $side = ours ]; then
				record r15e ours "$(get15 "$BIN/mkv" "$T/r15/get$r$side")"
			elif [ -x "${BENCH_OLD_MKV:-}" ]; then
				record r15e ref "$(get15 "$BENCH_OLD_MKV" "$T/r15/get$r$side")"
			fi
		done
	done
	rm -rf "$T/r15"
fi
# 15f-15k: ?list&locations of a 1,000,000-key index (tools/mkindex; 3
# replicas, 10 subvolumes, the volumes served by tools/synthvol so that
# they are up) vs ?list of the same, one whole listing each, alternating,
# on a master without and one with -volumesecret; the master's CPU per
# key.  15h/15i: the time the locations add over ?list, per key, vs the
# same per-key work done straight (tools/listlimit: no index, no socket).
if want 15; then
	N15L=1000000
	for b in mkindex synthvol listlimit; do
		[ -x "$BIN/$b" ] || make -s "$BIN/$b" || exit 1
	done
	free_port; L1=$FREE; free_port; L2=$FREE; free_port; L3=$FREE
	LV="127.0.0.1:$L1,127.0.0.1:$L2,127.0.0.1:$L3"
	log "row 15: ?list&locations vs ?list of $N15L keys, plain and signed; tools/listlimit; $RUNS runs"
	mkdir -p "$T/r15l"
	"$BIN/mkindex" -n "$N15L" -volumes "$LV" "$T/r15l/idx" >>"$T/r15.log" || exit 1
	cp -r "$T/r15l/idx" "$T/r15l/idxs"
	head -c 30 /dev/urandom | base64 | tr -d '\n' >"$T/r15l/secret"
	spawn synthvol15 "$BIN/synthvol" -n 1000 -volumes "$LV" && LSV=$LAST
	wait_port "$L3"
	free_port; LP=$FREE; free_port; LPS=$FREE
	spawn m15l "$BIN/mkv" -volumes "$LV" -db "$T/r15l/idx" -port "$LP" server && LM=$LAST
	spawn m15ls "$BIN/mkv" -volumes "$LV" -db "$T/r15l/idxs" -port "$LPS" \
		-volumesecret "$T/r15l/secret" server && LMS=$LAST
	wait_port "$LP" && wait_port "$LPS"
	for i in $(seq 100); do   # URLs are listed once the volumes are seen up
		curl -s "http://127.0.0.1:$LP/scale/?list&locations&limit=1" | grep -q http &&
			curl -s "http://127.0.0.1:$LPS/scale/?list&locations&limit=1" | grep -q http && break
		sleep 0.1
	done
	# list15 PORT PID QUERY: seconds of one whole listing, the master's CPU ticks
	list15() {
		local c0
		c0=$(awk '{ print $14 + $15 }' "/proc/$2/stat")
		curl -s -o /dev/null -w '%{time_total} ' "http://127.0.0.1:$1/scale/?$3"
		awk -v c0="$c0" '{ print $14 + $15 - c0 }' "/proc/$2/stat"
	}
	ks() { awk -v n="$N15L" -v t="$1" 'BEGIN { if (t > 0) printf "%.0f", n / t }'; }
	us() { awk -v n="$N15L" -v c="$1" 'BEGIN { printf "%.2f", c * 10000 / n }'; }
	for r in $(seq "$RUNS"); do
		for side in plain signed; do
			if [ $side = plain ]; then p=$LP pid=$LM f=f h=h c=j x=""; else p=$LPS pid=$LMS f=g h=i c=k x="-secret $T/r15l/secret"; fi
			if [ $((r % 2)) = 1 ]; then
				read -r tl cl <<<"$(list15 "$p" "$pid" "list&locations")"
				read -r tk ck <<<"$(list15 "$p" "$pid" list)"
			else
				read -r tk ck <<<"$(list15 "$p" "$pid" list)"
				read -r tl cl <<<"$(list15 "$p" "$pid" "list&locations")"
			fi
			# shellcheck disable=SC2086
			lim=$("$BIN/listlimit" -n "$N15L" -volumes "$LV" $x | sed -n 's/.*keys_per_s=\([0-9]*\).*/\1/p')
			echo "row 15$f run $r: list ${tk}s ${ck} ticks, locations ${tl}s ${cl} ticks, listlimit $lim keys/s" >>"$T/r15.log"
			record "r15$f" ours "$(ks "$tl")"
			record "r15$f" ref "$(ks "$tk")"
			record "r15$h" ours "$(ks "$(awk -v a="$tl" -v b="$tk" 'BEGIN { print a - b }')")"
			record "r15$h" ref "$lim"
			record "r15$c" ours "$(us "$cl")"
			record "r15$c" ref "$(us "$ck")"
		done
	done
	stop "$LM"; stop "$LMS"; stop "$LSV"
	rm -rf "$T/r15l"
fi

[ -n "$MA" ] && { stop "$MAPID"; MA=""; }
[ -n "$MB" ] && { stop "$MBPID"; MB=""; }

# ------------------------------------------------- row 6: the volume alone
if want 6 && [ $HAVE_VOL = 1 ]; then
	log "row 6: volume GET 4 KiB and 1 MiB, $RUNS x ${DUR}s each side; PUT 64 MiB, $RUNS each"
	free_port; MVP=$FREE
	volume_start mv "$MVP" || exit 1
	MV=http://127.0.0.1:$MVP
	head -c 4096 /dev/urandom >"$T/f4k"
	head -c 1048576 /dev/urandom >"$T/f1m"
	for u in "$MV" "$NV"; do
		curl -s -o /dev/null -T "$T/f4k" "$u/bench/f4k"
		curl -s -o /dev/null -T "$T/f1m" "$u/bench/f1m"
	done
	for r in $(seq "$RUNS"); do
		record r6s ours "$(wrk_rate "$MV/bench/f4k")"
		record r6s ref "$(wrk_rate "$NV/bench/f4k")"
		record r6l ours "$(wrk_rate "$MV/bench/f1m")"
		record r6l ref "$(wrk_rate "$NV/bench/f1m")"
	done
	# PUT of 64 MiB, each to a new name: MiB/s by curl's total time, which
	# for mkv-volume includes its fsyncs (nginx makes none).
	head -c $((64 << 20)) /dev/urandom >"$T/f64m"
	put_rate() {
		curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -T "$T/f64m" "$1" |
			awk '$1 == 201 && $2 > 0 { printf "%.1f", 64 / $2 }'
	}
	for r in $(seq "$RUNS"); do
		record r6p ours "$(put_rate "$MV/bench/p64-$r")"
		record r6p ref "$(put_rate "$NV/bench/p64-$r")"
	done
	rm -f "$T/f64m"
	stop "$LAST"
fi

# ------------------------------------------------------------- row 9: S3
# A master of its own over cluster A's volumes (3 replicas).  9a: GetObject
# of 1 MiB streamed by the master vs the same blob straight from its volume;
# 9b: boto3's upload_file (multipart, 8 MiB parts, 10 threads) of the big
# file, the master's peak RSS (reference: row 4's native PUT); 9c: a whole
# ListObjectsV2 walk (1,000 per page) vs the native ?list&limit=1000 walk.
S3H="X-Amz-Date: 20260101T000000Z"
if want 9 && [ $HAVE_MKV = 1 ] && [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import boto3' 2>/dev/null; then
	free_port; M9P=$FREE
	if master_start m9 "$M9P" "$VA" 3; then
		M9=http://127.0.0.1:$M9P M9PID=$LAST
		log "row 9a: S3 GetObject 1 MiB via the master vs straight from the volume, $RUNS x ${DUR}s each side"
		head -c 1048576 /dev/urandom >"$T/s1m"
		curl -s -o /dev/null -X PUT -H "$S3H" --data-binary @"$T/s1m" "$M9/bench/s3get"
		LOC9=$(curl -s -D - -o /dev/null "$M9/bench/s3get" | tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
		s3_rate() {
			$WRK -d"${DUR}s" -H "$S3H" "$1" 2>&1 | awk '/Non-2xx/ { bad = 1 } /^Requests\/sec:/ { r = $2 }
				END { if (!bad) print r }'
		}
		for r in $(seq "$RUNS"); do
			record r9a ours "$(s3_rate "$M9/bench/s3get")"
			record r9a ref "$(wrk_rate "$LOC9")"
		done
		log "row 9b: S3 multipart upload of $BIG_MB MiB (boto3 upload_file), $RUNS_BIG runs"
		head -c "$((BIG_MB * 1048576))" /dev/urandom >"$T/big8"
		for r in $(seq "$RUNS_BIG"); do
			echo 5 >"/proc/$M9PID/clear_refs" 2>/dev/null
			t0=$(date +%s.%N)
			if /usr/bin/python3 - "$M9" "$T/big8" >>"$T/m9.log" 2>&1 <<'PY'
import boto3, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="x",
                  aws_secret_access_key="x", region_name="us-east-1")
s3.upload_file(sys.argv[2], "bench", "s3big")
s3.delete_object(Bucket="bench", Key="s3big")
PY
			then
				record r9b ours "$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.2f", $1 - $2 }')"
				record r9b.rss ours "$(awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$M9PID/status")"
			else
				log "row 9b: upload_file failed (see $T/m9.log)"
			fi
		done
		rm -f "$T/big8"
		grep '^r4 ours ' "$SAMPLES" | sed 's/^r4 ours /r9b ref /' >>"$SAMPLES"
		grep '^r4.rss ours ' "$SAMPLES" | sed 's/^r4.rss ours /r9b.rss ref /' >>"$SAMPLES"
		log "row 9c: $KEYS keys, ListObjectsV2 vs ?list, $RUNS runs each"
		LG_TAG= lg_field rate put -c 8 -n "$KEYS" -s 16 -p /list8/k "$M9" >/dev/null
		s3_walk() { # keys/s of one whole ListObjectsV2 walk of bucket list8
			local tok="" n=0 t0 page
			t0=$(date +%s.%N)
			while :; do
				page=$(curl -s -H "$S3H" "$M9/list8?list-type=2&max-keys=1000${tok:+&continuation-token=$tok}")
				n=$((n + $(echo "$page" | grep -o '<Key>' | wc -l)))
				tok=$(echo "$page" | sed -n 's/.*<NextContinuationToken>\([^<]*\)<.*/\1/p')
				[ -n "$tok" ] || break
			done
			echo "$n $(date +%s.%N) $t0" | awk '{ if ($2 > $3) printf "%.0f", $1 / ($2 - $3) }'
		}
		native_walk() {
			local start="" n=0 t0 page
			t0=$(date +%s.%N)
			while :; do
				page=$(curl -s "$M9/list8/?list&limit=1000${start:+&start=$start}")
				n=$((n + $(echo "$page" | sed 's/.*"keys":\[//' | grep -o '"/list8/' | wc -l)))
				start=$(echo "$page" | sed -n 's/^{"next":"\([^"]*\)".*/\1/p' | sed 's|/|%2F|g')
				[ -n "$start" ] || break
			done
			echo "$n $(date +%s.%N) $t0" | awk '{ if ($2 > $3) printf "%.0f", $1 / ($2 - $3) }'
		}
		for r in $(seq "$RUNS"); do
			record r9c ours "$(s3_walk)"
			record r9c ref "$(native_walk)"
		done
		stop "$M9PID"
	fi
else
	log "row 9: skipped (no bin/mkv, or no python3-boto3)"
fi

# cpu_ns PID: nanoseconds on a CPU of all its threads so far.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
# wrk_cpu URL PID ROW SIDE: records the rate (ROW) and the server's CPU
# per request in µs (ROW.cpu: all its threads, from schedstat), which
# the other work on a shared machine sways far less than the rate.
wrk_cpu() {
	local c0 c1 out n
	c0=$(cpu_ns "$2")
	out=$($WRK -d"${DUR}s" "$1" 2>&1)
	c1=$(cpu_ns "$2")
	n=$(echo "$out" | awk '/requests in/ { print $1 }')
	record "$3" "$4" "$(echo "$out" | awk '/^Requests\/sec:/ { print $2 }')"
	[ -n "$n" ] && [ "$n" -gt 0 ] && record "$3.cpu" "$4" "$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n / 1000 }')"
}
# The volume secret of row 16 (and row 7 run signed for it).
VS14=$T/volume.secret
echo "bench-secret-0123456789abcdef" >"$VS14"
# signed URL METHOD: URL with ?md5=..&expires=.. (an hour), as the master signs.
signed() {
	local url=$1 path t h
	path=/${url#http://*/}
	t=$(($(date +%s) + 3600))
	h=$(printf '%s%s%s %s' "$t" "$path" "$2" "$(cat "$VS14")" | openssl md5 -binary | openssl base64 |
		tr '+/' '-_' | tr -d '=')
	echo "$url?md5=$h&expires=$t"
}

# --------------------------------------------- row 7: rebuild and rebalance
# Each against the volume limit of the same run: the listings a rebuild
# asks for (loadgen walk), and the GET + PUTs + DELETEs of every moved key
# (loadgen move; on mkv-volumes, which pull mkv's copies, the pulling PUTs
# + DELETEs: loadgen move -pull), made straight to the same volumes with
# as many clients as mkv's -workers (16).
if (want 7 || want 16) && [ $HAVE_MKV = 1 ]; then
	log "row 7: $KEYS keys x 3 replicas on 5 volumes: populate"
	V5="" V3="" D5=""
	for i in 1 2 3 4 5; do
		free_port; P7[$i]=$FREE
		V5="${V5:+$V5,}127.0.0.1:${P7[$i]}"
		[ $i -le 3 ] && V3="${V3:+$V3,}127.0.0.1:${P7[$i]}"
		D5="${D5:+$D5,}$T/r7/vols/v$i"
	done
	vols7() { # vols7 DIR: start the five volumes on DIR/v1..v5, each pulling from the others
		for i in 1 2 3 4 5; do
			VOL_PEERS=$V5 VOL_FLAGS=${VOL7_FLAGS:-} volume_start "v7-$i" "${P7[$i]}" "$1/v$i" || return 1
			V7PID[$i]=$LAST
		done
	}
	vols7stop() { for i in 1 2 3 4 5; do stop "${V7PID[$i]}"; done; }
	# The same five directories served by stock nginx (row 7c, 7d).
	ngx7() {
		for i in 1 2 3 4 5; do
			nginx_start nginx-volume.conf.in "n7-$i" "${P7[$i]}" \
				-e "s|$T/n7-$i/data|$1/v$i|g" || return 1
			V7PID[$i]=$LAST
		done
	}
	# The blobs go straight into the (not yet running) volumes' directories,
	# laid out as mkv-volume lays them out, md5 xattr included.
	POP=$(lg_field rate populate -n $KEYS -s $SMALL -volumes "$V5" -replicas 3 -subvolumes 10 \
		-p /bench/r7 -dirs "$D5")
	log "populated at $POP files/s"
	MOVES=$("$BIN/loadgen" moves -n $KEYS -volumes "$V5" -to "$V3" -replicas 3 -subvolumes 10 -p /bench/r7)
	field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	# timed NAME ROW COUNT mkv-args...: run mkv, record COUNT/wall-seconds.
	timed() {
		local name=$1 row=$2 n=$3 t0 t1
		shift 3
		sync    # start from a quiet disk: nothing of the last step still being written
		t0=$(date +%s.%N)
		if /usr/bin/time -o "$T/$name.cpu" -f "%U %S" "$BIN/mkv" -replicas 3 -subvolumes 10 "$@" \
			>"$T/$name.out" 2>&1; then
			t1=$(date +%s.%N)
			RATE=$(echo "$n $t0 $t1" | awk '{ printf "%.0f", $1 / ($3 - $2) }')
			# the tool's CPU per key, µs
			TCPU=$(awk -v n="$n" '{ printf "%.1f", ($1 + $2) * 1e6 / n }' "$T/$name.cpu")
			record "$row" ours "$RATE"
		else
			log "$name failed: $(tail -1 "$T/$name.out")"
		fi
	}
	restore7() {
		"$BIN/loadgen" restore -n $KEYS -s $SMALL -volumes "$V5" -to "$V3" -replicas 3 \
			-subvolumes 10 -p /bench/r7 -dirs "$D5" >/dev/null
	}
	# limit NAME ROW COUNT loadgen-args...: the same requests straight,
	# recorded as ROW's reference, COUNT/wall-seconds.
	limit() {
		local name=$1 row=$2 n=$3 t0 t1
		shift 3
		sync
		t0=$(date +%s.%N)
		if "$BIN/loadgen" "$@" -c 16 >"$T/$name.out" 2>&1; then
			t1=$(date +%s.%N)
			record "$row" ref "$(echo "$n $t0 $t1" | awk '{ printf "%.0f", $1 / ($3 - $2) }')"
		else
			log "$name failed: $(tail -1 "$T/$name.out")"
		fi
	}
	MOVE_ARGS="-n $KEYS -s $SMALL -volumes $V5 -to $V3 -replicas 3 -subvolumes 10 -p /bench/r7"
	# startvols KIND: the five volumes on the row's directories (mkv|nginx).
	startvols() {
		case $1 in
		mkv) vols7 "$T/r7/vols" ;;
		signed) VOL7_FLAGS="-volumesecret $VS14" vols7 "$T/r7/vols" ;;   # row 16
		*) ngx7 "$T/r7/vols" ;;
		esac
	}
	KINDS7=$(want 7 && echo mkv nginx || echo mkv)
	want 16 && KINDS7="$KINDS7 signed"
	# Each run: rebuild a fresh index from the five volumes, rebalance onto
	# three -- on mkv-volumes, then on nginx serving the same directories;
	# after each rebalance loadgen puts the files back on disk where the
	# populate put them (and the hash directories the rebalance emptied are
	# dropped), so the next one starts from the same state.
	# Each run, on mkv-volumes then on nginx serving the same directories:
	# rebuild a fresh index from the five volumes, then the walk; rebalance
	# onto three, then (the files put back) the same moves straight.  After
	# each, loadgen puts the files back on disk where the populate put them
	# (and the hash directories the rebalance emptied are dropped), so the
	# next one starts from the same state.
	for r in $(seq "$RUNS_BIG"); do
		# row 16's signed runs: first in even runs, last in odd ones
		kinds=$KINDS7
		want 16 && [ $((r % 2)) = 0 ] && kinds="signed ${KINDS7% signed}"
		for kind in $kinds; do
			sfx=$([ $kind = nginx ] && echo n)
			sig=$([ $kind = signed ] && echo "-volumesecret $VS14")
			row=$([ $kind = signed ] && echo r14sig || echo r7)
			log "row 7 run $r: rebuild and the listings straight, rebalance 5 -> 3 and the moves straight, on $kind volumes"
			startvols $kind || exit 1
			rm -rf "$T/r7/db"
			RATE=
			timed "rebuild$sfx" "${row}b$sfx" $KEYS -volumes "$V5" -db "$T/r7/db" $sig rebuild
			[ $kind = signed ] && record r16f ours "$RATE" && record r16f.cpu ours "$TCPU"
			[ $kind = mkv ] && want 16 && record r16f ref "$RATE" && record r16f.cpu ref "$TCPU"
			[ $kind != signed ] && want 7 && limit "walk$sfx" "r7b$sfx" $KEYS walk -volumes "$V5"
			RATE=
			timed "rebalance$sfx" "${row}r$sfx" "$(field moved "$MOVES")" -volumes "$V3" -db "$T/r7/db" $sig rebalance
			[ $kind = signed ] && record r16g ours "$RATE" && record r16g.cpu ours "$TCPU"
			[ $kind = mkv ] && want 16 && record r16g ref "$RATE" && record r16g.cpu ref "$TCPU"
			if [ "$r" = "$RUNS_BIG" ] && [ $kind != signed ]; then
				n=$(find "$T/r7/vols/v4" "$T/r7/vols/v5" -type f ! -name '.*' | wc -l)
				[ $kind = mkv ] && STRAY=$n || STRAYN=$n
			fi
			vols7stop
			restore7 || break 2
			[ $kind = signed ] && continue
			want 7 || continue
			startvols $kind || exit 1
			# mkv-volumes (-peers) pull mkv's copies: the limit pulls too
			limit "move$sfx" "r7r$sfx" "$(field moved "$MOVES")" move $MOVE_ARGS \
				$([ $kind = mkv ] && echo -pull)
			vols7stop
			restore7 || break 2
		done
	done
	# What the disk allows: synced 1 KiB writes per second (each PUT to an
	# mkv-volume and each DELETE needs at least one).
	SYNCS=$(cd "$T" && dd if=/dev/zero of=ddprobe bs=1k count=2000 oflag=dsync 2>&1 |
		awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") print int(2000 / $(i - 1)) }')
	rm -f "$T/ddprobe"
	REBUILD_SUMMARY=$(tail -1 "$T/rebuild.out" 2>/dev/null)
	REBALANCE_SUMMARY=$(tail -1 "$T/rebalance.out" 2>/dev/null)
	REBUILDN_SUMMARY=$(tail -1 "$T/rebuildn.out" 2>/dev/null)
	REBALANCEN_SUMMARY=$(tail -1 "$T/rebalancen.out" 2>/dev/null)
fi

# --------------------------------- row 11: minikeyvalue's own load tool
# thrasher: 16 clients, 10,000 keys, each PUT, GET (following), DELETE,
# against localhost:3000: the Go original and mkv take turns there, each on
# a fresh index over the same five nginx volumes, 3 replicas.
if want 11 && [ -n "${BENCH_GO:-}" ] && [ $HAVE_MKV = 1 ]; then
	if (exec 3<>/dev/tcp/127.0.0.1/3000) 2>/dev/null; then
		log "row 11: port 3000 is in use: no thrasher run"
	elif [ -x "$BENCH_GO/mkv" ] && [ -x "$BENCH_GO/thrasher" ]; then
		log "row 11: thrasher against mkv and the Go original, $THRASH runs each"
		V9=""
		for i in 1 2 3 4 5; do
			free_port; p=$FREE
			nginx_start nginx-volume.conf.in "t11-$i" "$p" || exit 1
			V9PID[$i]=$LAST
			V9="${V9:+$V9,}127.0.0.1:$p"
		done
		# cpu PID: its utime + stime so far, in clock ticks.
		cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
		# thrash NAME BINARY...: "cycles/s cpu-ms-per-cycle" of one
		# thrasher run (10,000 cycles) against it.
		thrash() {
			local name=$1 pid rate c0 c1
			shift
			rm -rf "$T/$name.db"
			spawn "$name" "$@" -volumes "$V9" -db "$T/$name.db" -port 3000 -replicas 3 server
			pid=$LAST
			wait_port 3000 && sleep 1
			c0=$(cpu "$pid")
			rate=$("$BENCH_GO/thrasher" 2>&1 | tee -a "$T/thrasher.log" | sed -n 's/^thats \([0-9.]*\)\/sec.*/\1/p')
			c1=$(cpu "$pid")
			stop "$pid"
			echo "$rate $(echo "$c0 $c1 $(getconf CLK_TCK)" | awk '{ printf "%.3f", ($2 - $1) * 1000 / $3 / 10000 }')"
		}
		# syscalls NAME BINARY...: system calls per cycle of one thrasher
		# run with `strace -c -f` on the master (sleeps left out: mkv's
		# samplers' clock_nanosleep, the Go runtime's nanosleep).
		syscalls() {
			local name=$1 pid spid
			shift
			rm -rf "$T/$name.db"
			spawn "$name" "$@" -volumes "$V9" -db "$T/$name.db" -port 3000 -replicas 3 server
			pid=$LAST
			wait_port 3000 && sleep 1
			strace -c -f -p "$pid" -o "$T/$name.strace" 2>/dev/null &
			spid=$!
			sleep 1
			"$BENCH_GO/thrasher" >>"$T/thrasher.log" 2>&1
			kill -INT "$spid"
			wait "$spid"
			stop "$pid"
			awk '$NF != "total" && $NF != "syscall" && $NF !~ /nanosleep$/ &&
			     $1 ~ /^[0-9.]+$/ { s += $4 } END { if (s) printf "%.1f", s / 10000 }' \
				"$T/$name.strace"
		}
		if command -v strace >/dev/null; then
			record r11c ours "$(syscalls t11s-mkv "$BIN/mkv")"
			record r11c ref "$(syscalls t11s-go "$BENCH_GO/mkv")"
		else
			log "row 11c: strace is not installed"
		fi
		for r in $(seq "$THRASH"); do
			set -- $(thrash t11-mkv "$BIN/mkv")
			record r11 ours "${1:-}"
			record r11b ours "${2:-}"
			set -- $(thrash t11-go "$BENCH_GO/mkv")
			record r11 ref "${1:-}"
			record r11b ref "${2:-}"
		done
		for i in 1 2 3 4 5; do stop "${V9PID[$i]}"; done
	else
		log "row 11: BENCH_GO=$BENCH_GO lacks mkv or thrasher"
	fi
fi

# ------------------------------------------- row 12: the cost of -metrics
# Row 1's GET -> 302 and row 6a's GET 4 KiB, each against a server with
# -metrics (its request counters, latency histogram and listener) and the
# same server without, alternating in one run; RUNS12 runs a side (5).
if want 12 && [ $HAVE_MKV = 1 ] && [ $HAVE_VOL = 1 ]; then
	RUNS12=${RUNS12:-5}
	log "row 12: rows 1 and 6a with -metrics vs without, $RUNS12 x ${DUR}s each side"
	free_port; P12OFF=$FREE; free_port; P12ON=$FREE; free_port; P12M=$FREE
	master_start m12off "$P12OFF" "$VA" 3 && M12OFF=$LAST
	MASTER_FLAGS="-metrics 127.0.0.1:$P12M" master_start m12on "$P12ON" "$VA" 3 && M12ON=$LAST
	free_port; V12OFF=$FREE; free_port; V12ON=$FREE; free_port; V12M=$FREE
	volume_start v12off "$V12OFF" && V12OFFPID=$LAST
	VOL_FLAGS="-metrics 127.0.0.1:$V12M" volume_start v12on "$V12ON" && V12ONPID=$LAST
	head -c 4096 /dev/urandom >"$T/f4k12"
	for p in $P12OFF $P12ON; do
		curl -s -o /dev/null -X PUT --data-binary hello "http://127.0.0.1:$p/bench/hot"
	done
	for p in $V12OFF $V12ON; do
		curl -s -o /dev/null -T "$T/f4k12" "http://127.0.0.1:$p/bench/f4k"
	done
	# Which side goes first swaps run by run: no order bias.
	for r in $(seq "$RUNS12"); do
		for side in $([ $((r % 2)) = 1 ] && echo "ours ref" || echo "ref ours"); do
			if [ $side = ours ]; then
				wrk_cpu "http://127.0.0.1:$P12ON/bench/hot" "$M12ON" r12a ours
			else
				wrk_cpu "http://127.0.0.1:$P12OFF/bench/hot" "$M12OFF" r12a ref
			fi
		done
		for side in $([ $((r % 2)) = 1 ] && echo "ours ref" || echo "ref ours"); do
			if [ $side = ours ]; then
				wrk_cpu "http://127.0.0.1:$V12ON/bench/f4k" "$V12ONPID" r12b ours
			else
				wrk_cpu "http://127.0.0.1:$V12OFF/bench/f4k" "$V12OFFPID" r12b ref
			fi
		done
	done
	curl -s "http://127.0.0.1:$P12M/metrics" | grep -q '^mkv_http_requests_total{method="GET",code="302"}' ||
		log "row 12: the master with -metrics counted no GET"
	for p in $M12OFF $M12ON $V12OFFPID $V12ONPID; do stop "$p"; done
fi

# --------------------------------------- row 16: the cost of -volumesecret
# Row 1's GET -> 302 on a master with -volumesecret vs without; rows 6a and
# 6b (GET 4 KiB, 1 MiB) with signed URLs on a volume with the secret vs
# plain URLs on one without, on mkv-volume and on nginx (both started by
# deploy/nginx/mkv-nginx-volume, so that the secure_link lines are the one
# difference); rebuild and rebalance are row 7's, signed (r16f, r16g).
# Alternating in one run, RUNS14 runs a side (5).
if want 16 && [ $HAVE_MKV = 1 ] && [ $HAVE_VOL = 1 ]; then
	RUNS14=${RUNS14:-5}
	log "row 16: rows 1, 6a, 6b with -volumesecret vs without, $RUNS14 x ${DUR}s each side"
	free_port; P14OFF=$FREE; free_port; P14ON=$FREE
	free_port; V14OFF=$FREE; free_port; V14ON=$FREE; free_port; N14OFF=$FREE; free_port; N14ON=$FREE
	volume_start v14off "$V14OFF" && V14OFFPID=$LAST
	VOL_FLAGS="-volumesecret $VS14" volume_start v14on "$V14ON" && V14ONPID=$LAST
	spawn n14off sh deploy/nginx/mkv-nginx-volume "$N14OFF" "$T/n14off" && N14OFFPID=$LAST
	wait_port "$N14OFF"
	spawn n14on sh deploy/nginx/mkv-nginx-volume -volumesecret "$VS14" "$N14ON" "$T/n14on" && N14ONPID=$LAST
	wait_port "$N14ON"
	V14="127.0.0.1:$V14OFF"
	master_start m14off "$P14OFF" "$V14" 1 && M14OFFPID=$LAST
	MASTER_FLAGS="-volumesecret $VS14" master_start m14on "$P14ON" "127.0.0.1:$V14ON" 1 && M14ONPID=$LAST
	for p in $P14OFF $P14ON; do
		curl -s -o /dev/null -X PUT --data-binary hello "http://127.0.0.1:$p/bench/hot"
	done
	head -c 4096 /dev/urandom >"$T/f4k14"
	head -c 1048576 /dev/urandom >"$T/f1m14"
	for p in $V14OFF $V14ON $N14OFF $N14ON; do
		for f in f4k14 f1m14; do
			u=$(signed "http://127.0.0.1:$p/bench/$f" PUT)
			curl -s -o /dev/null -T "$T/$f" "$u"
		done
	done
	# pair ROW URL-ON URL-OFF [PID-ON PID-OFF]: one run a side, the order
	# swapped run by run; with the pids also the server's CPU per request.
	pair() {
		local side
		for side in $([ $((r % 2)) = 1 ] && echo "ours ref" || echo "ref ours"); do
			if [ -n "${4:-}" ]; then
				if [ $side = ours ]; then wrk_cpu "$2" "$4" "$1" ours; else wrk_cpu "$3" "$5" "$1" ref; fi
			elif [ $side = ours ]; then
				record "$1" ours "$(wrk_rate "$2")"
			else
				record "$1" ref "$(wrk_rate "$3")"
			fi
		done
	}
	for r in $(seq "$RUNS14"); do
		pair r16a "http://127.0.0.1:$P14ON/bench/hot" "http://127.0.0.1:$P14OFF/bench/hot" "$M14ONPID" "$M14OFFPID"
		pair r16b "$(signed "http://127.0.0.1:$V14ON/bench/f4k14" GET)" "http://127.0.0.1:$V14OFF/bench/f4k14" "$V14ONPID" "$V14OFFPID"
		pair r16c "$(signed "http://127.0.0.1:$V14ON/bench/f1m14" GET)" "http://127.0.0.1:$V14OFF/bench/f1m14"
		pair r16d "$(signed "http://127.0.0.1:$N14ON/bench/f4k14" GET)" "http://127.0.0.1:$N14OFF/bench/f4k14"
		pair r16e "$(signed "http://127.0.0.1:$N14ON/bench/f1m14" GET)" "http://127.0.0.1:$N14OFF/bench/f1m14"
	done
	curl -s -I "http://127.0.0.1:$P14ON/bench/hot" | grep -qi '^location: .*?md5=' ||
		log "row 16: the master with -volumesecret signed no redirect"
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$N14ON/bench/f4k14")" = 403 ] ||
		log "row 16: nginx with -volumesecret took an unsigned GET"
	for p in $M14OFFPID $M14ONPID $V14OFFPID $V14ONPID $N14OFFPID $N14ONPID; do stop "$p"; done
fi

# ------------------------------------------------------ row 18: over TLS
# mkv-volume -tls vs nginx by mkv-nginx-volume -tls (listen ... ssl), the
# same certificate (tests/tls_certs.sh makes one now), wrk keeping its
# connections (the handshakes are not counted).  Under TLS libmicrohttpd
# cannot sendfile: each body goes through GnuTLS, nginx's through OpenSSL.
if want 18 && [ $HAVE_VOL = 1 ]; then
	log "row 18: volume GET 1 MiB and 4 KiB over TLS, mkv-volume vs nginx, $RUNS x ${DUR}s each side"
	sh tests/tls_certs.sh "$T/tls18" || exit 1
	TLS18="$T/tls18/srv.pem,$T/tls18/srv.key"
	free_port; V18=$FREE; free_port; N18=$FREE
	VOL_FLAGS="-tls $TLS18" volume_start v18 "$V18" && V18PID=$LAST
	spawn n18 sh deploy/nginx/mkv-nginx-volume -tls "$TLS18" "$N18" "$T/n18" && N18PID=$LAST
	wait_port "$N18"
	head -c 4096 /dev/urandom >"$T/f4k18"
	head -c 1048576 /dev/urandom >"$T/f1m18"
	for p in $V18 $N18; do
		for f in f4k18 f1m18; do
			curl -s --cacert "$T/tls18/ca.pem" -o /dev/null -T "$T/$f" "https://127.0.0.1:$p/bench/$f"
		done
	done
	for r in $(seq "$RUNS"); do
		record r18a ours "$(wrk_rate "https://127.0.0.1:$V18/bench/f1m18")"
		record r18a ref "$(wrk_rate "https://127.0.0.1:$N18/bench/f1m18")"
		record r18b ours "$(wrk_rate "https://127.0.0.1:$V18/bench/f4k18")"
		record r18b ref "$(wrk_rate "https://127.0.0.1:$N18/bench/f4k18")"
	done
	stop "$V18PID"
	stop "$N18PID"
	# 18c-e: the master over three TLS mkv-volumes vs over the same three
	# kinds plain, in turn: row 3's small-value cycle (the loops' client,
	# OpenSSL in the loop) and row 4's big PUT (libcurl), fresh masters
	# for the big PUT's peak RSS.
	[ -f "$T/big" ] || head -c "$((BIG_MB * 1048576))" /dev/urandom >"$T/big"
	P18="" S18="" L18=""
	for i in 1 2 3; do
		free_port; VOL_FLAGS="-tls $TLS18" volume_start "v18s$i" "$FREE" && P18="$P18 $LAST"
		S18="$S18,https://127.0.0.1:$FREE"
		free_port; volume_start "v18p$i" "$FREE" && P18="$P18 $LAST"
		L18="$L18,127.0.0.1:$FREE"
	done
	M18=""
	for m in "m18s $S18" "m18p $L18" "m18sb $S18" "m18pb $L18"; do
		set -- $m
		free_port
		MASTER_FLAGS="-cacert $T/tls18/ca.pem" master_start "$1" "$FREE" "${2#,}" 3 || { M18=""; break; }
		M18="$M18 http://127.0.0.1:$FREE $LAST"
		P18="$P18 $LAST"
	done
	[ -n "$M18" ] && set -- $M18 && for r in $(seq "$RUNS"); do
		record r18c ours "$(LG_CACERT="$T/tls18/ca.pem" LG_TAG=18c lg_field rate cycle -c $CONC -d $DUR -s $SMALL "$1")"
		record r18c ref "$(LG_TAG=18c-plain lg_field rate cycle -c $CONC -d $DUR -s $SMALL "$3")"
	done
	[ -n "$M18" ] && set -- $M18 && for r in $(seq "$RUNS_BIG"); do
		big_master "$5" "$6" r18d ours
		big_master "$7" "$8" r18d ref
		curl -s -o /dev/null -X DELETE "$5/bench/large"
		curl -s -o /dev/null -X DELETE "$7/bench/large"
	done
	# 18f: GET -> 302 over TLS (rows 1's), the master under -tls vs nginx's
	# `return 302` under ssl, the same certificate and headers.
	free_port; M18T=$FREE
	rm -rf "$T/m18t.db"
	spawn m18t "$BIN/mkv" -volumes "${L18#,}" -db "$T/m18t.db" -port "$M18T" -replicas 3 \
		-subvolumes 10 -tls "$TLS18" server && P18="$P18 $LAST"
	wait_port "$M18T"
	M18T=https://127.0.0.1:$M18T
	for i in $(seq 100); do
		curl -sf -o /dev/null --cacert "$T/tls18/ca.pem" -X PUT --data-binary hello "$M18T/bench/hot" &&
			break
		sleep 0.1
	done
	hdr=$(curl -s --cacert "$T/tls18/ca.pem" -D - -o /dev/null "$M18T/bench/hot" | tr -d '\r')
	free_port; R18=$FREE
	nginx_start nginx-302.conf.in n18t "$R18" \
		-e "s|@LOCATION@|$(echo "$hdr" | sed -n 's/^[Ll]ocation: //p')|" \
		-e "s|@MD5@|$(echo "$hdr" | sed -n 's/^[Cc]ontent-[Mm]d5: //p')|" \
		-e "s|@VOLUMES@|$(echo "$hdr" | sed -n 's/^[Kk]ey-[Vv]olumes: //p')|" \
		-e "s|listen \(127.0.0.1:[0-9]*\);|listen \1 ssl; ssl_certificate $T/tls18/srv.pem; ssl_certificate_key $T/tls18/srv.key;|" &&
		P18="$P18 $LAST"
	echo "$hdr" | head -1 | grep -q ' 302' || log "row 18f: the master's GET /bench/hot: $(echo "$hdr" | head -1)"
	for r in $(seq "$RUNS"); do
		record r18f ours "$(wrk_rate "$M18T/bench/hot")"
		record r18f ref "$(wrk_rate "https://127.0.0.1:$R18/bench/hot")"
	done
	# 18g: the same GET -> 302, every 10 ms on a kept-alive connection,
	# while 3000 sockets send a whole ClientHello at once (a signature each)
	for r in $(seq "$RUNS"); do
		record r18g ours "$(python3 bench/burst18.py "$M18T/bench/hot" "$T/tls18/ca.pem" 3000)"
		record r18g ref "$(python3 bench/burst18.py "https://127.0.0.1:$R18/bench/hot" "$T/tls18/ca.pem" 3000)"
	done
	for p in $P18; do stop "$p"; done
fi

# ------------------------ row 13: rebuild and rebalance vs the Go original
# GO_KEYS keys x 3 replicas of 1 KiB, populated straight on disk for five
# volumes (-subvolumes 10, the Go default); each round, on the same
# volumes: mkv rebuilds a fresh index and rebalances 5 -> 3, the files are
# put back, then the Go original does the same (in even rounds the Go
# original first).  On mkv-volumes (started
# with -peers, so mkv's copies are pulled) and on nginx serving the same
# directories.  rate = keys/s (rebuild), moved keys/s (rebalance).
if want 13 && [ -n "${BENCH_GO:-}" ] && [ -x "${BENCH_GO:-}/mkv" ] && [ $HAVE_MKV = 1 ]; then
	GO_KEYS=${GO_KEYS:-20000}
	log "row 13: rebuild and rebalance, $GO_KEYS keys, mkv and the Go original alternating"
	V5G="" V3G="" D5G=""
	for i in 1 2 3 4 5; do
		free_port; P13[$i]=$FREE
		V5G="${V5G:+$V5G,}127.0.0.1:${P13[$i]}"
		[ $i -le 3 ] && V3G="${V3G:+$V3G,}127.0.0.1:${P13[$i]}"
		D5G="${D5G:+$D5G,}$T/r13/vols/v$i"
	done
	"$BIN/loadgen" populate -n "$GO_KEYS" -s $SMALL -volumes "$V5G" -replicas 3 -subvolumes 10 \
		-p /bench/r13 -dirs "$D5G" >/dev/null
	MOVES13=$("$BIN/loadgen" moves -n "$GO_KEYS" -volumes "$V5G" -to "$V3G" -replicas 3 \
		-subvolumes 10 -p /bench/r13)
	MOVED13=$(echo "$MOVES13" | tr ' ' '\n' | sed -n 's/^moved=//p')
	vols13() {
		for i in 1 2 3 4 5; do
			if [ "$1" = mkv ]; then
				VOL_PEERS=$V5G volume_start "v13-$i" "${P13[$i]}" "$T/r13/vols/v$i" || return 1
			else
				nginx_start nginx-volume.conf.in "n13-$i" "${P13[$i]}" \
					-e "s|$T/n13-$i/data|$T/r13/vols/v$i|g" || return 1
			fi
			V13PID[$i]=$LAST
		done
	}
	# go13 ROW SIDE N BINARY ARGS...: N / wall seconds of one run, recorded,
	# and the tool's peak RSS (VmHWM, read every 0.1 s while it runs) as
	# ROW.rss in MiB.
	go13() {
		local row=$1 side=$2 n=$3 t0 t1 pid hwm=0 v
		shift 3
		sync
		t0=$(date +%s.%N)
		"$@" >"$T/r13.out" 2>&1 &
		pid=$!
		while kill -0 $pid 2>/dev/null; do
			v=$(awk '/^VmHWM:/ { print $2 }' /proc/$pid/status 2>/dev/null)
			[ -n "$v" ] && hwm=$v
			sleep 0.1
		done
		if wait $pid; then
			t1=$(date +%s.%N)
			record "$row" "$side" "$(echo "$n $t0 $t1" | awk '{ printf "%.0f", $1 / ($3 - $2) }')"
			record "$row.rss" "$side" "$(echo "$hwm" | awk '{ printf "%.1f", $1 / 1024 }')"
			log "row 13: $side $row: $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }') s, peak RSS $((hwm / 1024)) MiB"
		else
			log "row 13: $* failed: $(tail -1 "$T/r13.out")"
		fi
	}
	for r in $(seq "${GO_ROUNDS:-$RUNS_BIG}"); do
		for kind in mkv nginx; do
			sfx=$([ $kind = nginx ] && echo n)
			# the side that goes first swaps round by round: each run
			# follows the other's file churn as often (ext4 here slows
			# down on inodes freed in the last minutes, bench header)
			for who in $([ $((r % 2)) = 1 ] && echo ours ref || echo ref ours); do
				bin="$BIN/mkv"
				[ $who = ref ] && bin="$BENCH_GO/mkv"
				vols13 $kind || exit 1
				rm -rf "$T/r13/db"
				go13 "r13b$sfx" $who "$GO_KEYS" "$bin" -replicas 3 -subvolumes 10 \
					-volumes "$V5G" -db "$T/r13/db" rebuild
				go13 "r13r$sfx" $who "$MOVED13" "$bin" -replicas 3 -subvolumes 10 \
					-volumes "$V3G" -db "$T/r13/db" rebalance
				for i in 1 2 3 4 5; do stop "${V13PID[$i]}"; done
				"$BIN/loadgen" restore -n "$GO_KEYS" -s $SMALL -volumes "$V5G" -to "$V3G" \
					-replicas 3 -subvolumes 10 -p /bench/r13 -dirs "$D5G" >/dev/null || break 3
			done
		done
	done
fi

# ------------------------------------------- row 17: scale (SCALE=1 only)
# `make bench SCALE=1`: a SCALE_KEYS-key index (default 10,000,000; built
# with tools/mkindex into SCALE_DIR, default $T/scale, and kept there when
# SCALE_DIR is given, so a second run reuses it: its volumes' ports are
# kept in SCALE_DIR/idxN.vols and taken again) against a 1,000-key one,
# each behind a master on 3 synthetic volumes (tools/synthvol): GET -> 302
# of random existing keys (wrk, bench/random-keys.lua), the master's CPU
# per request, its idle CPU with -metrics, how soon it listens; then
# rebuild from synthetic volumes of SCALE_REBUILD keys (default 1,000,000)
# and rebalance's planning over the big index (every key already home:
# nothing moves).  docs/scale.md has the figures and the sizing.
if [ "${SCALE:-0}" = 1 ] && want 17 && [ $HAVE_MKV = 1 ]; then
	SK=${SCALE_KEYS:-10000000}
	SR=${SCALE_REBUILD:-1000000}
	SD=${SCALE_DIR:-$T/scale}
	mkdir -p "$SD"
	[ -x "$BIN/mkindex" ] && [ -x "$BIN/synthvol" ] || make -s "$BIN/mkindex" "$BIN/synthvol" || exit 1
	# an index names its volumes: the ports it was built for are taken
	# again when they are free, so a kept index is not built again
	SV=$(cat "$SD/idx$SK.vols" 2>/dev/null)
	for p in $(echo "$SV" | tr ',' '\n' | sed 's/.*://'); do
		case " $USED_PORTS " in *" $p "*) SV="" ;; esac
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && SV=""
	done
	if [ -n "$SV" ]; then
		USED_PORTS="$USED_PORTS $(echo "$SV" | tr ',' '\n' | sed 's/.*://' | tr '\n' ' ')"
	else
		free_port; S1=$FREE; free_port; S2=$FREE; free_port; S3=$FREE
		SV="127.0.0.1:$S1,127.0.0.1:$S2,127.0.0.1:$S3"
	fi
	S3=${SV##*:}
	log "row 17: indexes of 1,000 and $SK keys in $SD (building what is missing)"
	for n in 1000 "$SK"; do
		if [ "$(cat "$SD/idx$n.vols" 2>/dev/null)" != "$SV" ]; then
			rm -rf "$SD/idx$n"
			"$BIN/mkindex" -n "$n" -volumes "$SV" "$SD/idx$n" >"$SD/idx$n.build" || exit 1
			echo "$SV" >"$SD/idx$n.vols"
			log "row 17: $(cat "$SD/idx$n.build")"
		fi
	done
	spawn synthvol "$BIN/synthvol" -n 1000 -volumes "$SV" && SVPID=$LAST
	wait_port "$S3"
	# cpu_ticks PID: utime + stime so far, in 1/100 s
	cpu_ticks() { awk '{ print $14 + $15 }' /proc/"$1"/stat; }
	free_port; P14S=$FREE; free_port; P14B=$FREE; free_port; M14S=$FREE; free_port; M14B=$FREE
	for side in ref ours; do
		if [ $side = ref ]; then n=1000 p=$P14S mp=$M14S; else n=$SK p=$P14B mp=$M14B; fi
		t0=$(date +%s.%N)
		spawn "m14$side" "$BIN/mkv" -volumes "$SV" -db "$SD/idx$n" -port "$p" \
			-metrics "127.0.0.1:$mp" server
		[ $side = ref ] && M14SPID=$LAST || M14BPID=$LAST
		wait_port "$p"
		record r17d $side "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')"
	done
	# the count: kept with the index, or walked once (then kept at the stop)
	for i in $(seq 600); do
		curl -s "http://127.0.0.1:$M14B/metrics" | grep -q '^mkv_index_keys ' && break
		sleep 1
	done
	# warm: the tables into the page cache, then one unrecorded run each
	# (a master just started maps each page of its tables at first touch)
	cat "$SD/idx$SK"/*.ldb >/dev/null
	for p in $P14S $P14B; do
		NKEYS=$([ $p = $P14S ] && echo 1000 || echo "$SK") \
			wrk -t2 -c64 -d"$((DUR * 4))s" -s bench/random-keys.lua "http://127.0.0.1:$p" >/dev/null 2>&1
	done
	for r in $(seq "$RUNS"); do
		for side in $([ $((r % 2)) = 1 ] && echo "ours ref" || echo "ref ours"); do
			if [ $side = ref ]; then n=1000 p=$P14S pid=$M14SPID; else n=$SK p=$P14B pid=$M14BPID; fi
			c0=$(cpu_ticks "$pid")
			out=$(NKEYS=$n wrk -t2 -c64 -d"$((DUR * 4))s" -s bench/random-keys.lua "http://127.0.0.1:$p" 2>&1)
			c1=$(cpu_ticks "$pid")
			reqs=$(echo "$out" | awk '/requests in/ { print $1 }')
			record r17a $side "$(echo "$out" | awk '/^Requests\/sec:/ { print $2 }')"
			[ -n "$reqs" ] && [ "$reqs" -gt 0 ] &&
				record r17b $side "$(awk -v a="$c0" -v b="$c1" -v n="$reqs" 'BEGIN { printf "%.2f", (b - a) * 10000 / n }')"
		done
	done
	log "row 17: idle CPU with -metrics, 60 s, both at once"
	a0=$(cpu_ticks "$M14BPID"); b0=$(cpu_ticks "$M14SPID")
	sleep 60
	record r17c ours "$(awk -v a="$a0" -v b="$(cpu_ticks "$M14BPID")" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
	record r17c ref "$(awk -v a="$b0" -v b="$(cpu_ticks "$M14SPID")" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
	stop "$M14SPID"; stop "$M14BPID"
	# SCALE_REBALANCE=0 skips it (100M keys: ~20 min here)
	if [ "${SCALE_REBALANCE:-1}" = 1 ]; then
		log "row 17: rebalance's planning over $SK keys (nothing to move)"
		t0=$(date +%s.%N)
		"$BIN/mkv" -volumes "$SV" -db "$SD/idx$SK" rebalance >>"$T/r14.log" 2>&1 </dev/null
		record r17g ours "$(awk -v a="$t0" -v b="$(date +%s.%N)" -v n="$SK" 'BEGIN { printf "%.0f", n / (b - a) }')"
	fi
	stop "$SVPID"
	log "row 17: rebuild of $SR keys from synthetic volumes"
	free_port; R1=$FREE; free_port; R2=$FREE; free_port; R3=$FREE
	RV="127.0.0.1:$R1,127.0.0.1:$R2,127.0.0.1:$R3"
	spawn synthvol-r "$BIN/synthvol" -n "$SR" -volumes "$RV" && SVPID=$LAST
	for i in $(seq 1200); do grep -q ready "$T/synthvol-r.log" && break; sleep 0.5; done
	rm -rf "$SD/rebuilt"
	/usr/bin/time -f "%e %M" -o "$T/r14.time" "$BIN/mkv" -volumes "$RV" -db "$SD/rebuilt" rebuild >>"$T/r14.log" 2>&1 </dev/null
	set -- $(cat "$T/r14.time")
	record r17e ours "$(awk -v s="$1" -v n="$SR" 'BEGIN { printf "%.0f", n / s }')"
	record r17f ours "$(awk -v k="$2" 'BEGIN { printf "%.0f", k / 1024 }')"
	"$BIN/mkindex" -check -n "$SR" -volumes "$RV" "$SD/rebuilt" >>"$T/r14.log" 2>&1 ||
		log "row 17: the rebuilt index is not mkindex's (see $T/r14.log)"
	stop "$SVPID"
	rm -rf "$SD/rebuilt"
fi

# ------------------------------------------------------------------ table
# stats ROW SIDE: "median min max" of the samples, nothing when none.
stats() {
	awk -v k="$1 $2" '$1 " " $2 == k { print $3 }' "$SAMPLES" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR], NR }'
}
fmt() { awk -v x="$1" 'BEGIN { if (x >= 100) printf "%.0f", x; else if (x >= 10) printf "%.1f", x; else printf "%.2f", x }'; }
fig() { # fig "median min max n": "median (min–max)"
	[ -z "$1" ] && { echo "—"; return; }
	set -- $1
	echo "$(fmt "$1") ($(fmt "$2")–$(fmt "$3"))"
}

# row ID SUBJECT UNIT OURS_ROW REF_ROW TARGET-KIND TARGET-VALUE
#   kind ge/le: on the ratio ours/ref; lt: on our figure; "-": none.
TABLE=$T/table
: >"$TABLE"
MET=0 MISSED=0
row() {
	local id=$1 what=$2 unit=$3 or=$4 rr=$5 kind=$6 tv=$7 so sr ratio=— target=— met=—
	so=$(stats "$or" ours)
	sr=$(stats "$rr" ref)
	if [ -n "$so" ] && [ -n "$sr" ]; then
		ratio=$(echo "${so%% *} ${sr%% *}" | awk '{ printf "%.2f", $2 ? $1 / $2 : 0 }')
	fi
	case $kind in
	ge) target="≥ $tv×" ;;
	le) target="≤ $tv×" ;;
	lt) target="< $tv $unit" ;;
	esac
	if [ -n "$so" ] && [ "$kind" != - ]; then
		met=$(echo "${so%% *} $ratio $tv" | awk -v k="$kind" '{
			ok = k == "ge" ? $2 >= $3 : k == "le" ? $2 <= $3 : $1 < $3
			print ok ? "yes" : "**no**" }')
		[ "$met" = yes ] && MET=$((MET + 1)) || MISSED=$((MISSED + 1))
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$id" "$what ($unit)" "$(fig "$so")" \
		"$(fig "$sr")" "$ratio" "$target" "$met" >>"$TABLE"
}
BIGH=$([ "$BIG_MB" = 1024 ] && echo "1 GiB" || echo "$BIG_MB MiB")
row 1 "GET → 302, existing key: mkv vs nginx \`return 302\`" "req/s" r1 r1 ge 0.9
row 2 "GET → 404, missing key: mkv vs nginx \`return 302\`" "req/s" r2 r2 ge 0.9
row 3a "PUT→GET→DELETE cycle, $CONC clients, 1 KiB, 3 replicas on 3 nginx volumes: mkv vs the volume limit (the same 3 PUTs, GET, 3 DELETEs straight)" "cycles/s" r3 r3 ge 0.5
row 3b "the same on 3 mkv-volumes (each PUT and DELETE fsynced): mkv vs the volume limit" "cycles/s" r3b r3b - -
row 4a "PUT $BIGH, mkv-volumes: 3 replicas vs 1 replica, wall" "s" r4 r4 le 1.3
row 4b "PUT $BIGH, 3 replicas: master peak RSS (VmHWM) vs 1 replica" "MiB" r4.rss r4.rss lt 64
row 4c "PUT $BIGH, 3 replicas (mkv-volumes) vs one \`curl -T\` to nginx, wall" "s" r4c r4c - -
row 4d "PUT $BIGH, nginx volumes (no fsync): 3 replicas vs 1, wall" "s" r4n r4n le 1.3
row 4e "PUT $BIGH, nginx volumes: master peak RSS, 3 replicas vs 1" "MiB" r4n.rss r4n.rss lt 64
row 5 "GET 1 MiB through the redirect (client follows, $CONC clients) vs straight from nginx" "MiB/s" r5 r5 - -
row 6a "volume alone, GET 4 KiB: mkv-volume vs nginx" "req/s" r6s r6s ge 0.8
row 6b "volume alone, GET 1 MiB: mkv-volume vs nginx" "req/s" r6l r6l ge 0.9
row 6c "volume alone, PUT 64 MiB to a new name: mkv-volume (fsyncs) vs nginx (does not)" "MiB/s" r6p r6p - -
row 7a "rebuild, $KEYS keys × 3 replicas on 5 mkv-volumes, vs the volume limit (the same listings straight)" "keys/s" r7b r7b - -
row 7b "rebalance 5 → 3 mkv-volumes (each copy pulled by its volume, each copy and delete fsynced), vs the volume limit (the same pulling PUTs and DELETEs straight)" "moved keys/s" r7r r7r - -
row 7c "rebuild, the same files on 5 nginx volumes, vs the volume limit" "keys/s" r7bn r7bn - -
row 7d "rebalance 5 → 3 nginx volumes (no fsync), vs the volume limit" "moved keys/s" r7rn r7rn - -
row 8a "\`mkv put\` of ${NPUT:-?} files of 4 KiB (3 replicas, mkv-volumes) vs \`xargs -P16 curl -T\`" "files/s" r8 r8 ge 3
row 8b "\`mkv verify\`, 3 replicas: on mkv-volumes (hashed there) vs on nginx volumes (streamed)" "keys/s" r8v r8v - -
row 15a "read ${N15:-2000} files of 64 KiB, 8 threads, 3 replicas on 3 nginx volumes: tools/mkvread.py (its listing included) vs the same URLs fetched straight" "files/s" r15a r15a ge 0.95
row 15b "the same: mkvread.py vs each key through the master's 302 (http.client, kept alive)" "files/s" r15b r15b ge 1.5
row 15c "read ${N15:-2000} files of 1 MiB: mkvread.py vs the same URLs straight" "files/s" r15c r15c ge 0.95
row 15d "the same 1 MiB files: mkvread.py vs through the 302" "files/s" r15d r15d - -
row 15l "15c's 1 MiB files: mkvread.py vs the same URLs through its own connections, straight (its limit)" "files/s" r15l r15l - -
row 15e "\`mkv get\` of ${N15:-2000} files of 64 KiB (?list&locations, no 302) vs BENCH_OLD_MKV's (a 302 per file)" "files/s" r15e r15e ge 1.3
row 15f "?list&locations of ${N15L:-1000000} keys (3 URLs each; tools/mkindex, tools/synthvol) vs ?list of the same, one whole listing" "keys/s" r15f r15f ge 0.8
row 15g "the same on a master with \`-volumesecret\` (each URL signed)" "keys/s" r15g r15g ge 0.8
row 15h "15f: the time the locations add over ?list, per key, vs the same work done straight (tools/listlimit)" "keys/s" r15h r15h - -
row 15i "15g's, signed, vs tools/listlimit -secret" "keys/s" r15i r15i - -
row 15j "15f: the master's CPU per key, ?list&locations vs ?list" "µs" r15j r15j - -
row 15k "15g's, signed" "µs" r15k r15k - -
row 9a "S3 GetObject 1 MiB streamed by the master vs straight from the volume" "req/s" r9a r9a ge 0.8
row 9b "S3 multipart upload $BIGH (boto3 upload_file, 8 MiB parts), 3 replicas: wall, vs row 4's native PUT" "s" r9b r9b - -
row 9c "the same upload: master peak RSS (VmHWM), vs row 4's native PUT" "MiB" r9b.rss r9b.rss lt 64
row 9d "ListObjectsV2 walk of $KEYS keys (1,000 per page) vs native ?list&limit=1000" "keys/s" r9c r9c - -
row 10 "upload of $DS_KEYS keys of 4 KiB, $CONC clients, 3 replicas on 3 nginx volumes: mkv vs the same PUTs straight" "keys/s" r10 r10 ge 0.5
row 14a "GET → 302 signed (SigV4, \`-keys\`) vs unsigned (no \`-keys\`)" "req/s" r14a r14a ge 0.8
row 14b "S3 PUT $BIGH, 3 replicas, body SHA-256 checked as it streams (\`-keys\`) vs unsigned, wall" "s" r14b r14b le 1.11
row 14c "native PUT $BIGH by \`curl --aws-sigv4 -T\` (\`-keys\`) vs plain \`curl -T\`, wall" "s" r14c r14c le 1.11
row 12a "row 1's GET → 302 on a master with \`-metrics\` vs without" "req/s" r12a r12a ge 0.98
row 12b "row 6a's GET 4 KiB on mkv-volume with \`-metrics\` vs without" "req/s" r12b r12b ge 0.98
row 12c "row 1's GET → 302: the master's CPU per request, with \`-metrics\` vs without" "µs" r12a.cpu r12a.cpu le 1.02
row 12d "row 6a's GET 4 KiB: mkv-volume's CPU per request, with \`-metrics\` vs without" "µs" r12b.cpu r12b.cpu le 1.02
row 11 "minikeyvalue's thrasher (16 clients, PUT→GET→DELETE), 5 nginx volumes, 3 replicas: mkv vs the Go original" "cycles/s" r11 r11 ge 2
row 11b "master CPU per thrasher cycle (utime + stime over 10,000 cycles): mkv vs the Go original" "ms" r11b r11b le 0.5
row 11c "master system calls per thrasher cycle (\`strace -c -f\`, sleeps left out): mkv vs the Go original" "calls" r11c r11c - -
row 16a "row 1's GET → 302 on a master with \`-volumesecret\` (each Location signed) vs without" "req/s" r16a r16a ge 0.95
row 16b "row 6a's GET 4 KiB on mkv-volume: signed URLs (with \`-volumesecret\`) vs plain (without)" "req/s" r16b r16b ge 0.95
row 16c "row 6b's GET 1 MiB on mkv-volume: signed vs plain" "req/s" r16c r16c ge 0.95
row 16d "row 6a's GET 4 KiB on nginx (mkv-nginx-volume): \`secure_link\` and signed URLs vs plain" "req/s" r16d r16d ge 0.95
row 16e "row 6b's GET 1 MiB on nginx: signed vs plain" "req/s" r16e r16e ge 0.95
row 18a "volume alone over TLS (\`-tls\`), GET 1 MiB: mkv-volume vs nginx \`ssl\`, same certificate, kept alive" "req/s" r18a r18a ge 0.9
row 18b "the same, GET 4 KiB" "req/s" r18b r18b - -
row 18c "row 3's cycle on 3 mkv-volumes over TLS (\`https://\` volumes) vs the same plain" "cycles/s" r18c r18c ge 0.7
row 18d "PUT $BIGH, 3 replicas on mkv-volumes over TLS vs plain, wall" "s" r18d r18d le 1.25
row 18e "PUT $BIGH, 3 TLS replicas: master peak RSS vs plain" "MiB" r18d.rss r18d.rss lt 64
row 18f "GET → 302 over TLS, existing key: the master under \`-tls\` vs nginx \`return 302\` with \`ssl\`, kept alive" "req/s" r18f r18f ge 0.8
row 18g "18f's GET → 302 while 3000 ClientHellos arrive at once (RSA 2048: a signature each): the 99th percentile of its latency, the master vs nginx" "ms" r18g r18g lt 50
row 16f "row 7a's rebuild on mkv-volumes: signed (every listing) vs plain" "keys/s" r16f r16f ge 0.9
row 16g "row 7b's rebalance on mkv-volumes: signed (every GET, pull, PUT, DELETE) vs plain" "moved keys/s" r16g r16g ge 0.9
row 16h "row 16a: the master's CPU per GET → 302, signed vs not" "µs" r16a.cpu r16a.cpu le 1.05
row 16i "row 16b: mkv-volume's CPU per GET 4 KiB, checking the signature vs not" "µs" r16b.cpu r16b.cpu le 1.05
row 16j "row 16f: the rebuild's own CPU per key, signed vs not" "µs" r16f.cpu r16f.cpu le 1.1
row 16k "row 16g: the rebalance's own CPU per moved key, signed vs not" "µs" r16g.cpu r16g.cpu le 1.1
row 13a "rebuild, ${GO_KEYS:-20000} keys × 3 replicas on 5 mkv-volumes: mkv vs the Go original" "keys/s" r13b r13b ge 1
row 13b "rebalance 5 → 3 mkv-volumes (mkv's copies pulled by the volumes): mkv vs the Go original" "moved keys/s" r13r r13r ge 1
row 13c "rebuild, the same files on 5 nginx volumes: mkv vs the Go original" "keys/s" r13bn r13bn ge 1.2
row 13d "rebalance 5 → 3 nginx volumes: mkv vs the Go original" "moved keys/s" r13rn r13rn ge 1.2
row 13e "rebuild on nginx volumes: the tool's peak RSS, mkv vs the Go original" "MiB" r13bn.rss r13bn.rss - -
row 13f "rebalance 5 → 3 mkv-volumes: the tool's peak RSS, mkv vs the Go original" "MiB" r13r.rss r13r.rss - -
row 17a "GET → 302, random existing keys (wrk -c64): ${SCALE_KEYS:-10000000}-key index vs 1,000-key index" "req/s" r17a r17a ge 0.8
row 17b "the same: the master's CPU per request (utime + stime), big index vs small" "µs" r17b r17b - -
row 17c "idle CPU with \`-metrics\` over 60 s, big index vs small" "s" r17c r17c lt 0.6
row 17d "master listening after start, big index vs small" "s" r17d r17d lt 2
row 17e "rebuild of ${SCALE_REBUILD:-1000000} keys × 3 replicas from synthetic nginx-style volumes (30 subvolumes)" "keys/s" r17e r17e - -
row 17f "the same rebuild: peak RSS" "MiB" r17f r17f - -
row 17g "rebalance's planning over the big index, nothing to move" "keys/s" r17g r17g - -

# ------------------------------------------------------------------ report
CPU=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MEM=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
# The filesystem under the data, with what shapes row 7 on it: ext4 without
# a journal walks past recently freed inodes, and `discard` makes every
# freed block wait for the disk.
set -- $(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$T" 2>/dev/null) "" "" ""
FSX=""
[ "$(cat "/sys/fs/ext4/${1##*/}/journal_task" 2>/dev/null)" = "<none>" ] && FSX=", no journal"
case ",$3," in *,discard,*) FSX="$FSX, discard" ;; esac
DISK="$1 ($2$FSX)"
VERS="nginx $(nginx -v 2>&1 | sed 's|.*nginx/||'), libmicrohttpd $(pkg-config --modversion libmicrohttpd 2>/dev/null),"
VERS="$VERS gcc $(gcc -dumpfullversion 2>/dev/null), libcurl $(curl --version | awk 'NR == 1 { print $2 }'),"
VERS="$VERS $(wrk -v 2>&1 | awk 'NR == 1 { print $1 " " $2 }'), kernel $(uname -r)"

OUT=bench/results.md
NOTES_MARK="<!-- notes: everything below this line is kept by the bench script -->"
NOTES=""
[ -f "$OUT" ] && grep -qF "$NOTES_MARK" "$OUT" && NOTES=$(sed -n "/$NOTES_MARK/,\$p" "$OUT" | tail -n +2)
{
	echo "# mkv benchmark results"
	echo
	echo "Written by \`bench/run.sh\` ($MODE mode: $RUNS runs of ${DUR}s per side for rows 1-3, 5, 6;"
	echo "$RUNS runs of $DS_KEYS keys for row 10; $RUNS_BIG runs for rows 4, 7 and 8; $THRASH for row 11)"
	echo "on $(date -u '+%Y-%m-%d %H:%M UTC'), mkv $REV."
	echo
	echo "- Machine: $(nproc) CPUs ($CPU), $MEM memory; data on $DISK; loopback only."
	echo "- Versions: $VERS."
	echo "- Figures: median (min–max). Ratio = mkv median / reference median (for wall times"
	echo "  lower is better, so the target is a ceiling). Ours and the reference alternate run by run."
	echo "- Volumes: $([ $HAVE_VOL = 1 ] && echo "mkv-volume" || echo "**nginx (bin/mkv-volume was missing)**")"
	echo "  unless the row says otherwise; masters run \`-subvolumes 10\`. wrk: \`$WRK\`, keep-alive."
	[ $HAVE_MKV = 1 ] || echo "- **bin/mkv was missing: master rows have no figure.**"
	echo
	echo "| row | what | mkv | reference | ratio | target | met |"
	echo "|---|---|---|---|---|---|---|"
	cat "$TABLE"
	echo
	if [ -s "$T/lg.log" ]; then
		echo "Row 3, latency of each step, mean / p99 in ms (median over runs); a direct PUT or DELETE is"
		echo "one volume request, the master's makes one to each replica:"
		echo
		echo "| cycle | PUT | GET | DELETE |"
		echo "|---|---|---|---|"
		for tag in 3a 3a-direct 3b 3b-direct; do
			grep -q "^$tag " "$T/lg.log" || continue
			case $tag in
			3a) printf '| mkv, 3 nginx volumes ' ;;
			3a-direct) printf '| straight to the 3 nginx volumes ' ;;
			3b) printf '| mkv, 3 mkv-volumes ' ;;
			3b-direct) printf '| straight to the 3 mkv-volumes ' ;;
			esac
			for f in put get delete; do
				printf '| '
				for q in ms p99; do
					grep "^$tag " "$T/lg.log" | tr ' ' '\n' | sed -n "s/^${f}_$q=//p" | sort -g |
						awk '{ v[NR] = $1 } END { printf "%s", NR ? v[int((NR + 1) / 2)] : "?" }'
					[ $q = ms ] && printf ' / '
				done
				printf ' '
			done
			echo "|"
		done
		echo
	fi
	if want 7 && [ $HAVE_MKV = 1 ]; then
		echo "Row 7: $(echo "$MOVES" | sed 's/ /, /g') (moved = keys that need at least one copy;"
		echo "$SMALL bytes each, so about $(echo "$MOVES" | tr ' ' '\n' | sed -n 's/^copies=//p' |
			awk -v s=$SMALL '{ printf "%.1f", $1 * s / 1048576 }') MiB copied); populated straight on disk at ${POP:-?} files/s;"
		echo "files left on the removed volumes after the last rebalance: ${STRAY:-?} (mkv-volumes), ${STRAYN:-?} (nginx)."
		PERKEY=$(echo "$MOVES" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			printf "%.1f", v["moved"] ? (v["copies"] + v["deletes"]) / v["moved"] : 0 }')
		echo "This disk takes ${SYNCS:-?} synced 1 KiB writes/s (\`dd oflag=dsync\`, one writer; writers in parallel get"
		echo "more, as their flushes overlap). In row 7b each moved key is $PERKEY PUTs + DELETEs on mkv-volumes, each fsynced."
		echo "The reference is the volume limit of the same run: \`loadgen walk\` (the listings rebuild asks"
		echo "for, one request at a time per client: mkv pipelines them) and \`loadgen move\` (each moved key's"
		echo "GET, PUTs and DELETEs; on mkv-volumes \`-pull\`: the pulling PUTs and DELETEs), 16 clients, like mkv's -workers."
		echo "Last summaries: rebuild \`${REBUILD_SUMMARY:-}\`; rebalance \`${REBALANCE_SUMMARY:-}\`;"
		echo "on nginx: rebuild \`${REBUILDN_SUMMARY:-}\`; rebalance \`${REBALANCEN_SUMMARY:-}\`."
		echo
	fi
	[ -n "${PUT_SUMMARY:-}" ] && echo "Row 8a, the last \`mkv put\`: \`$PUT_SUMMARY\`." && echo
	echo "$NOTES_MARK"
	[ -n "$NOTES" ] && echo "$NOTES"
} >"$OUT"
mkdir -p bench/out
cp "$SAMPLES" bench/out/samples.txt
cat "$OUT" | sed -n "1,/$NOTES_MARK/p" | grep -vF "$NOTES_MARK"
log "targets met: $MET, missed: $MISSED; wrote $OUT (raw samples: bench/out/samples.txt)"
