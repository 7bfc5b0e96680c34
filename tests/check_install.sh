#!/bin/sh
# check_install.sh -- make install and uninstall into a staging DESTDIR,
# the units there under `systemd-analyze verify`, -version, the man pages
# against -h; make deb, its contents and control, lintian; and, as root,
# the package installed into a throwaway root and purged from it.  Run by
# `make test` (MKV_ROOT: the checkout; MKV_BIN: build-san/bin means the
# sanitizer build).  Prints ok/FAIL/SKIP per check; any FAIL fails.
set -u
cd "${MKV_ROOT:-$(dirname "$0")/..}" || exit 2
san=
case "${MKV_BIN:-}" in */build-san/bin) san=1 ;; esac
# The make that runs this passes its jobserver in MAKEFLAGS: ours is serial.
unset MAKEFLAGS MFLAGS MAKELEVEL
mk() { make --no-print-directory ${san:+SANITIZE=1} "$@"; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
failed=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=1; }
skip() { echo "SKIP $*"; }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() {
	d=$1
	shift
	if "$@"; then ok "$d"; else fail "$d"; fi
}
# same DESCRIPTION WANT GOT: two files' lines, the difference shown.
same() {
	if diff -u "$2" "$3" >"$tmp/diff"; then ok "$1"; else fail "$1:" && sed 's/^/     /' "$tmp/diff"; fi
}

# shellcheck disable=SC2046
set -- $(tools/version.sh)
version=$1 commit=$2
docs=$(cd docs && printf '%s\n' *.md)

# The files install puts under PREFIX=/usr, units in $1.
expected() {
	{
		printf '%s\n' /usr/bin/mkv /usr/bin/mkv-volume /usr/lib/mkv/mkv-nginx-volume \
			/usr/lib/mkv/nginx.conf.in /usr/share/man/man1/mkv.1.gz \
			/usr/share/man/man1/mkv-volume.1.gz /usr/share/doc/mkv/README.md \
			/usr/share/mkv/mkvread.py
		for u in mkv.service mkv-volume@.service mkv-nginx-volume@.service; do echo "$1/$u"; done
		for d in $docs; do echo "/usr/share/doc/mkv/docs/$d"; done
	} | LC_ALL=C sort
}

# ---- make install DESTDIR=$tmp/stage PREFIX=/usr ----
stage=$tmp/stage
if ! mk install DESTDIR="$stage" PREFIX=/usr >"$tmp/log" 2>&1; then
	fail "make install DESTDIR=... PREFIX=/usr:" && sed 's/^/     /' "$tmp/log"
	exit 1
fi
expected /usr/lib/systemd/system >"$tmp/want"
(cd "$stage" && find . ! -type d | sed 's|^\.||' | LC_ALL=C sort) >"$tmp/got"
same "make install lays out the tree" "$tmp/want" "$tmp/got"
check "the binaries and the nginx script are executable" \
	test -x "$stage/usr/bin/mkv" -a -x "$stage/usr/bin/mkv-volume" -a -x "$stage/usr/lib/mkv/mkv-nginx-volume"
check "the units and man pages name PREFIX's paths, not /usr/local's" \
	sh -c "! grep -n /usr/local '$stage'/usr/lib/systemd/system/* &&
		! gzip -dc '$stage'/usr/share/man/man1/*.gz | grep -n /usr/local"
# Every path of mkv's under /usr a unit, a man page or the README names is there.
for f in "$stage"/usr/lib/systemd/system/* "$stage"/usr/share/man/man1/*.gz "$stage"/usr/share/doc/mkv/README.md; do
	case $f in *.gz) gzip -dc "$f" ;; *) cat "$f" ;; esac |
		grep -oE '/usr/(bin/mkv|lib/mkv|share/mkv|share/doc/mkv)[-a-zA-Z0-9_./@]*' | sed 's/[.]$//' | sort -u
done | while read -r p; do [ -e "$stage$p" ] || echo "$p"; done >"$tmp/got"
check "the paths the installed units, man pages and README name exist" test ! -s "$tmp/got"
sed 's/^/     missing: /' "$tmp/got"
# The installed README's links resolve beside it, and the docs' links too.
(cd "$stage/usr/share/doc/mkv" && for f in README.md docs/*.md; do
	grep -o '](\([^)#:]*\))' "$f" | sed 's/^](//; s/)$//' | while read -r l; do
		[ -e "$(dirname "$f")/$l" ] || echo "$f: $l"; done; done) >"$tmp/got"
check "the installed docs' links resolve" test ! -s "$tmp/got"
sed 's/^/     broken: /' "$tmp/got"

# systemd-analyze verify --root checks that each Exec* command exists under
# the root; the root needs systemd's own units (sysinit.target...) and
# /bin/kill (ExecReload) beside ours, so it is a copy.
if command -v systemd-analyze >/dev/null && [ -d /lib/systemd/system ]; then
	vr=$tmp/verify
	mkdir -p "$vr/lib/systemd/system" "$vr/bin"
	cp -a "$stage/." "$vr/" && cp -a /lib/systemd/system/. "$vr/lib/systemd/system/" &&
		cp /bin/kill "$vr/bin/kill"
	if (cd "$vr" && systemd-analyze verify --root="$vr" mkv.service mkv-volume@3001.service \
		mkv-nginx-volume@3001.service) >"$tmp/log" 2>&1 && [ ! -s "$tmp/log" ]; then
		ok "the installed units pass systemd-analyze verify --root (their binaries exist there)"
	else
		fail "systemd-analyze verify --root:" && sed 's/^/     /' "$tmp/log"
	fi
else
	skip "systemd-analyze verify: no systemd-analyze here"
fi

echo "mkv $version (commit $commit)" >"$tmp/want"
"$stage/usr/bin/mkv" -version >"$tmp/got" 2>&1
same "mkv -version: the version and the commit" "$tmp/want" "$tmp/got"
echo "mkv-volume $version (commit $commit)" >"$tmp/want"
"$stage/usr/bin/mkv-volume" -version >"$tmp/got" 2>&1
same "mkv-volume -version" "$tmp/want" "$tmp/got"

# The man page's OPTIONS are the flags -h prints ("-name ARG"), and -h.
for p in mkv mkv-volume; do
	{ "$stage/usr/bin/$p" -h | sed -n 's/^  \(-[a-z]*\)\( [^ ][^ ]*\)\{0,1\}  .*/\1\2/p'; echo "-h"; } |
		LC_ALL=C sort >"$tmp/want"
	gzip -dc "$stage/usr/share/man/man1/$p.1.gz" | sed -n '/^\.SH OPTIONS/,/^\.SH [^O]/p' |
		sed -n 's/^\.BI\{0,1\} \\-\([a-z]*\)\( "\(.*\)"\)\{0,1\}$/-\1\3/p' | LC_ALL=C sort >"$tmp/got"
	same "man $p lists the flags $p -h prints, no more" "$tmp/want" "$tmp/got"
done

if mk uninstall DESTDIR="$stage" PREFIX=/usr >"$tmp/log" 2>&1; then
	(cd "$stage" && find . -mindepth 1) >"$tmp/got"
	check "make uninstall leaves DESTDIR empty" test ! -s "$tmp/got"
	[ -s "$tmp/got" ] && sed 's/^/     left: /' "$tmp/got"
else
	fail "make uninstall:" && sed 's/^/     /' "$tmp/log"
fi

# An unwritable PREFIX stops before any file is copied, and says why.
if mk install DESTDIR=/proc/mkv-nowhere >"$tmp/log" 2>&1; then
	fail "make install into /proc succeeded"
else
	check "make install where it cannot write stops with a reason" \
		grep -q "make install: cannot write /proc/mkv-nowhere" "$tmp/log"
fi

# ---- make deb ----
# Without dpkg-deb (a PATH of everything else) it says so.
mkdir "$tmp/nodeb"
ln -s /usr/bin/* /usr/sbin/* "$tmp/nodeb/" 2>/dev/null
rm -f "$tmp/nodeb/dpkg-deb"
if PATH=$tmp/nodeb mk deb DEBDIR="$tmp" >"$tmp/log" 2>&1; then
	fail "make deb without dpkg-deb succeeded"
else
	check "make deb without dpkg-deb stops with a reason" grep -q "make deb: no dpkg-deb" "$tmp/log"
fi
arch=$(dpkg --print-architecture)
deb=$tmp/mkv_${version}_$arch.deb
if ! mk deb DEBDIR="$tmp" >"$tmp/log" 2>&1 || [ ! -f "$deb" ]; then
	fail "make deb: no $deb:" && sed 's/^/     /' "$tmp/log"
	exit 1
fi
ok "make deb: $(basename "$deb")"
expected /lib/systemd/system >"$tmp/want"
printf '%s\n' /usr/share/doc/mkv/copyright /usr/share/doc/mkv/changelog.gz >>"$tmp/want"
LC_ALL=C sort -o "$tmp/want" "$tmp/want"
dpkg-deb --contents "$deb" | awk '$1 !~ /^d/ { print substr($6, 2) }' | LC_ALL=C sort >"$tmp/got"
same "dpkg-deb --contents: the files" "$tmp/want" "$tmp/got"
check "dpkg-deb --contents: /etc/mkv/ (for the keys and the volume secret)" \
	sh -c "dpkg-deb --contents '$deb' | grep '^d.* \./etc/mkv/\$' >/dev/null"
check "dpkg-deb --contents: root's, 0755 and 0644" \
	sh -c "! dpkg-deb --contents '$deb' | awk '\$2 != \"root/root\" || \$1 !~ /^(drwxr-xr-x|-rwxr-xr-x|-rw-r--r--)\$/' | grep ."
printf 'mkv\n%s\n%s\n' "$version" "$arch" >"$tmp/want"
dpkg-deb --field "$deb" Package Version Architecture | sed 's/^[^:]*: //' >"$tmp/got"
same "dpkg-deb --info: name, version, architecture" "$tmp/want" "$tmp/got"
dep=$(dpkg-deb --field "$deb" Depends)
check "Depends (dpkg-shlibdeps) names libc6, libleveldb1d, libmicrohttpd12, libcurl4: $dep" \
	sh -c "echo '$dep' | grep -q 'libc6 (>= ' && echo '$dep' | grep -q libleveldb1d &&
		echo '$dep' | grep -q libmicrohttpd12 && echo '$dep' | grep -q libcurl4"
check "dpkg-deb --info: postinst and postrm" \
	sh -c "dpkg-deb --info '$deb' | grep -q ' postinst ' && dpkg-deb --info '$deb' | grep -q ' postrm '"
mkdir "$tmp/x" && dpkg-deb -x "$deb" "$tmp/x"
check "the packaged binaries are stripped, bin/'s are not" sh -c "
	! readelf -S '$tmp/x/usr/bin/mkv' | grep -q debug_info &&
	! readelf -S '$tmp/x/usr/bin/mkv-volume' | grep -q debug_info &&
	readelf -S '${MKV_BIN:-bin}/mkv' | grep -q debug_info"

if command -v lintian >/dev/null; then
	if lintian --fail-on error "$deb" >"$tmp/log" 2>&1; then
		ok "lintian: no errors$(grep -c '^W:' "$tmp/log" | sed 's/^0$//; s/.\{1,\}/, & warnings/')"
	else
		fail "lintian:" && sed 's/^/     /' "$tmp/log"
	fi
	grep '^[WE]:' "$tmp/log" | sed 's/^/     /'
else
	fail "lintian is missing (make deps installs it)"
fi

# ---- the package in a throwaway root: dpkg --root, scripts run outside
# it with DPKG_ROOT set (postinst adds the user to that root's passwd).
# The libraries are the host's, so --force-depends.
if [ "$(id -u)" != 0 ]; then
	skip "dpkg --root install, mkv -version there, purge: needs root"
	exit $failed
fi
r=$tmp/root
mkdir -p "$r/etc" "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
: >"$r/var/lib/dpkg/status"
echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
echo 'root:x:0:' >"$r/etc/group"
echo 'root:*:19000:0:99999:7:::' >"$r/etc/shadow"
echo 'root:*::' >"$r/etc/gshadow"
hostpw=$(md5sum /etc/passwd /etc/group)
dpkgr() { dpkg --root="$r" --force-script-chrootless --force-depends --log=/dev/null "$@"; }
if dpkgr -i "$deb" >"$tmp/log" 2>&1; then
	ok "dpkg --root: installed"
	echo "mkv $version (commit $commit)" >"$tmp/want"
	"$r/usr/bin/mkv" -version >"$tmp/got" 2>&1
	same "mkv -version in the root" "$tmp/want" "$tmp/got"
	check "postinst made the mkv user in the root" grep -q '^mkv:x:[0-9]*:[0-9]*::/var/lib/mkv:/usr/sbin/nologin$' "$r/etc/passwd"
	gid=$(sed -n 's/^mkv:x:\([0-9]*\):.*/\1/p' "$r/etc/group")
	check "/etc/mkv in the root: root, group mkv ($gid), 0750" \
		test "$(stat -c '%u %g %a' "$r/etc/mkv")" = "0 $gid 750"
	check "dpkg -s: installed" sh -c "dpkg --root='$r' -s mkv | grep -q '^Status: install ok installed'"
	# the user made, or there (a reinstall): postinst says nothing of it
	dpkgr -i "$deb" >>"$tmp/log" 2>&1
	check "postinst is quiet, first install and reinstall (no useradd lines)" \
		sh -c "! grep useradd '$tmp/log'"
else
	fail "dpkg --root -i:" && sed 's/^/     /' "$tmp/log"
fi
if dpkgr --purge mkv >"$tmp/log" 2>&1; then
	(cd "$r" && find . ! -type d | grep -v '^\./var/lib/dpkg/' | grep -v '^\./etc/') >"$tmp/got"
	check "dpkg --purge: no file of the package left in the root" test ! -s "$tmp/got"
	sed 's/^/     left: /' "$tmp/got"
else
	fail "dpkg --root --purge:" && sed 's/^/     /' "$tmp/log"
fi
check "the host's /etc/passwd and /etc/group untouched" test "$hostpw" = "$(md5sum /etc/passwd /etc/group)"
exit $failed
