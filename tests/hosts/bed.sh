#!/bin/sh
# bed.sh -- a cluster of hosts, not of ports: network namespaces joined by
# veth pairs to a bridge that lives in a namespace of its own.
#
#   bed.sh run NVOL CMD [ARG...]   make a bed of NVOL volume hosts, run CMD
#                                  in the clients' namespace, remove the bed
#   bed.sh cut HOST                take HOST's side of its link down: HOST
#                                  goes silent (nothing refuses, nothing answers)
#   bed.sh heal HOST               bring it back
#   bed.sh rate HOST RATE          shape HOST's link both ways (tc tbf), e.g. 8mbit
#   bed.sh unrate HOST             unshape it
#   bed.sh clean                   remove the beds whose bed.sh is gone (kill -9)
#
# Hosts: m (the master, 10.231.0.2), c (the clients, 10.231.0.3), v1..vN
# (volumes, 10.231.0.11...).  Namespaces are named mkvbed<pid>-<host>; cut,
# heal, rate and unrate find the bed in $MKV_BED, which run exports to CMD
# along with MKV_BED_DIR (a temporary directory, a tmpfs of up to 4 GiB
# where it can be mounted, removed with the bed).  The
# bridge has no link to the namespace bed.sh was started in: nothing is
# routed outside the bed.  Delay is not made here (this kernel has no
# netem): tests/hosts/relay.c sits in front of a host for that.
#
# Without root, or where namespaces cannot be made, run says so and exits 0
# (skipped), unless MKV_HOSTS_REQUIRED=1 (CI), where that fails.
set -u

IP=${IP:-ip}
TC=${TC:-$(command -v tc || echo /usr/sbin/tc)}

die() {
	echo "bed.sh: $*" >&2
	exit 1
}

# Remove bed $1: kill what runs in its namespaces, delete them and its directory.
remove_bed() {
	for ns in $($IP netns list 2>/dev/null | sed -n "s/^\($1-[a-z0-9]*\).*/\1/p"); do
		pids=$($IP netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] && kill -9 $pids 2>/dev/null
	done
	for ns in $($IP netns list 2>/dev/null | sed -n "s/^\($1-[a-z0-9]*\).*/\1/p"); do
		$IP netns del "$ns" 2>/dev/null
	done
	for d in "${TMPDIR:-/tmp}/$1".*; do
		mountpoint -q "$d" 2>/dev/null && umount -l "$d"
	done
	rm -rf "${TMPDIR:-/tmp}/$1".*
}

# Beds whose bed.sh no longer runs (killed with -9: no trap ran).
clean_stale() {
	for bed in $($IP netns list 2>/dev/null | sed -n 's/^\(mkvbed[0-9]*\)-.*/\1/p' | sort -u); do
		pid=${bed#mkvbed}
		if ! grep -q bed.sh "/proc/$pid/cmdline" 2>/dev/null; then
			echo "bed.sh: removing stale bed $bed" >&2
			remove_bed "$bed"
		fi
	done
}

addr() {
	case "$1" in
	m) echo 10.231.0.2 ;;
	c) echo 10.231.0.3 ;;
	v[0-9]*) echo "10.231.0.$((10 + ${1#v}))" ;;
	*) die "no host $1" ;;
	esac
}

# Host $1's namespace, joined to the bridge: eth0 inside, h-$1 on the bridge.
add_host() {
	ns=$BED-$1
	$IP netns add "$ns" || return 1
	$IP -n "$ns" link set lo up &&
	$IP -n "$BED-br" link add "h-$1" type veth peer name eth0 netns "$ns" &&
	$IP -n "$BED-br" link set "h-$1" master br0 &&
	$IP -n "$BED-br" link set "h-$1" up &&
	$IP -n "$ns" addr add "$(addr "$1")/24" dev eth0 &&
	$IP -n "$ns" link set eth0 up
}

need_bed() {
	[ -n "${MKV_BED:-}" ] || die "MKV_BED is not set (use bed.sh run)"
	BED=$MKV_BED
	addr "$1" >/dev/null
}

cmd_run() {
	[ $# -ge 2 ] || die "usage: bed.sh run NVOL CMD [ARG...]"
	nvol=$1
	shift
	skip() {
		if [ "${MKV_HOSTS_REQUIRED:-}" = 1 ]; then
			echo "bed.sh: FAIL: $* (MKV_HOSTS_REQUIRED=1)" >&2
			exit 1
		fi
		echo "bed.sh: SKIP: the multi-host tests need network namespaces: $*" >&2
		exit 0
	}
	[ "$(id -u)" = 0 ] || skip "not root"
	command -v "$IP" >/dev/null || skip "no ip (iproute2)"
	clean_stale
	BED=mkvbed$$
	MKV_BED_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$BED.XXXXXX") || die "mktemp failed"
	trap 'remove_bed $BED' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	$IP netns add "$BED-br" 2>/dev/null || skip "ip netns add failed"
	# The volumes' data in memory: the figures are the network's, not a
	# shared disk's, and removing 60,000 files from a busy disk took minutes.
	mount -t tmpfs -o size=4g,mode=0700 "$BED" "$MKV_BED_DIR" 2>/dev/null ||
		echo "bed.sh: no tmpfs: the data goes to $MKV_BED_DIR on disk" >&2
	$IP -n "$BED-br" link add br0 type bridge || die "no bridge"
	$IP -n "$BED-br" link set br0 up
	for h in m c $(seq -f 'v%g' 1 "$nvol"); do
		add_host "$h" || die "cannot add host $h"
	done
	export MKV_BED=$BED MKV_BED_DIR MKV_BED_NVOL=$nvol
	# In the background, so that a signal reaches the trap at once.
	$IP netns exec "$BED-c" "$@" &
	child=$!
	wait $child
	rc=$?
	exit $rc
}

case "${1:-}" in
run)
	shift
	cmd_run "$@"
	;;
cut)
	need_bed "$2"
	$IP -n "$BED-$2" link set eth0 down
	;;
heal)
	need_bed "$2"
	$IP -n "$BED-$2" link set eth0 up
	;;
rate)
	need_bed "$2"
	# Both ways: HOST's egress on eth0, the bridge's towards HOST on h-HOST.
	$TC -n "$BED-$2" qdisc replace dev eth0 root tbf rate "$3" burst 64kb latency 1s &&
	$TC -n "$BED-br" qdisc replace dev "h-$2" root tbf rate "$3" burst 64kb latency 1s
	;;
unrate)
	need_bed "$2"
	$TC -n "$BED-$2" qdisc del dev eth0 root 2>/dev/null
	$TC -n "$BED-br" qdisc del dev "h-$2" root 2>/dev/null
	true
	;;
clean)
	clean_stale
	;;
*)
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
	exit 2
	;;
esac
