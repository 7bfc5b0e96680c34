#!/bin/sh
# mkdeb.sh WORK [OUTDIR] -- mkv_VERSION_ARCH.deb from the staging install
# `make deb` made in WORK/debian/mkv (PREFIX=/usr; a source package's
# layout, which dpkg-shlibdeps wants): the binaries stripped (bin/ keeps its
# debug info), /etc/mkv, the copyright and changelog Debian wants, and the control
# file with the version (tools/version.sh) and the libraries dpkg-shlibdeps
# finds.  Prints the package's path.
set -eu
umask 022
work=$(cd "$1" && pwd) out=${2:-.}
here=$(cd "$(dirname "$0")" && pwd)
root=$work/debian/mkv doc=$work/debian/mkv/usr/share/doc/mkv
# shellcheck disable=SC2046
set -- $("$here/../../tools/version.sh")
version=$1 commit=$2
arch=$(dpkg --print-architecture)
# The changelog's date: the commit's (a tarball's: now).
when=$(date +%s)
[ ! -e "$here/../../.git" ] || when=$(git -C "$here" -c safe.directory='*' log -1 --format=%ct)

strip --remove-section=.comment --remove-section=.note --strip-unneeded \
	"$root/usr/bin/mkv" "$root/usr/bin/mkv-volume"
install -m 644 "$here/copyright" "$doc/copyright"
# A native package (its version has no Debian revision): changelog.gz.
sed -e "s|@VERSION@|$version|" -e "s|@COMMIT@|$commit|" -e "s|@DATE@|$(date -R -u -d "@$when")|" \
	"$here/changelog" | gzip -9n >"$doc/changelog.gz"

# /etc/mkv, for the keys and the volume secret (docs/deploy.md): shipped
# root's 0755, made root:mkv 0750 by postinst once the user exists.
install -d -m 755 "$root/etc/mkv" "$root/DEBIAN"
printf 'Source: mkv\n\nPackage: mkv\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/mkv/usr/bin/mkv debian/mkv/usr/bin/mkv-volume)
depends=${depends#shlibs:Depends=}
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$depends|" \
	-e "s|@SIZE@|$(du -sk "$root" | cut -f1)|" "$here/control" >"$root/DEBIAN/control"
install -m 755 "$here/postinst" "$here/postrm" "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort |
	xargs md5sum) >"$root/DEBIAN/md5sums"
deb=$out/mkv_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
