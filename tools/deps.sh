#!/bin/sh
# Install the Debian packages mkv needs to build, test and run, when missing.
set -e
PKGS="build-essential pkg-config libmicrohttpd-dev libleveldb-dev libcurl4-openssl-dev
      libssl-dev libgnutls28-dev libjansson-dev check libsystemd-dev nginx curl wrk valgrind strace
      python3-boto3 awscli rclone s3cmd python3-requests iproute2
      systemd prometheus python3-prometheus-client chromium chromium-driver python3-selenium
      dpkg-dev lintian"
# One dpkg-query for all (make runs this before every build).
# shellcheck disable=SC2086
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' $PKGS 2>/dev/null |
	awk '/ ok installed$/ { printf "%s ", $1 }')"
missing=""
for p in $PKGS; do
	case "$installed" in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
# Debian starts the packaged nginx on port 80; mkv runs its own instances.
if echo "$missing" | grep -q nginx; then
	$SUDO service nginx stop >/dev/null 2>&1 || true
fi
# The same for Prometheus (port 9090): check_service runs its own.
if echo "$missing" | grep -qw prometheus; then
	$SUDO service prometheus stop >/dev/null 2>&1 || true
fi
