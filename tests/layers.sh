#!/bin/sh
# layers.sh -- fails when a file includes a header its layer may not
# (docs/architecture.md draws the layers).  Run by `make test`.
#
#   common/   its own headers only
#   volume/   common/
#   master/   common/  (the store and the native API)
#   s3/       common/ (the front among it) and master/store.h
#   ops/      common/, master/store.h and master/mkv.h; main.c also s3/s3.h
#   tools/    common/  (bench's and the bed's programs: a client of the
#             store, never a part of it)
#
# common/record.h, the index's record codec, only in master/ and common/:
# s3/ and ops/ reach records through store.h.
# And each library's header in one place: microhttpd.h in the front,
# curl.h in the volume client (and in tools/: a load generator is a client
# as any other, on libcurl), leveldb/c.h in the index
# (and tools/mkindex.c, which writes big indexes straight for bench row 17).
#
# An include counts however it is written: indented, "# include", a
# quoted path with ../ or ./ anywhere in it (resolved, so
# "../common/../master/x.h" is master/'s), and a quoted header that is no
# file of the tree (a library's header, "curl/curl.h", goes in <>).
cd "$(dirname "$0")/.." || exit 2
bad=0

# allowed FILE HEADER: may FILE (its folder's rule) include HEADER?
allowed() {
	dir=${1%%/*}
	case "$dir:$2" in   # the record codec: the store's own (others: store.h)
	volume:common/record.h | s3:common/record.h | ops:common/record.h) return 1 ;;
	esac
	case "$2" in
	"$dir"/*) return 0 ;;   # its own folder
	common/*) return 0 ;;
	esac
	case "$dir:$2" in
	s3:master/store.h) return 0 ;;
	ops:master/store.h | ops:master/mkv.h) return 0 ;;
	esac
	[ "$1:$2" = "ops/main.c:s3/s3.h" ]
}

# norm PATH: PATH with "." and ".." resolved, into $h (no fork: this runs
# for every include).
norm() {
	h=
	set -f
	IFS=/
	for c in $1; do
		case "$c" in
		'' | .) ;;
		..)
			case "$h" in
			'' | .. | */..) h=${h:+$h/}.. ;;
			*/*) h=${h%/*} ;;
			*) h= ;;
			esac ;;
		*) h=${h:+$h/}$c ;;
		esac
	done
	unset IFS
	set +f
}

# lib FILE HEADER: may FILE include the library header <HEADER>?
lib() {
	case "$2" in
	microhttpd.h) only="common/front.c" ;;
	curl/curl.h) only="common/httpc.c tools/*.c" ;;
	gnutls/*) only="common/front.c" ;;
	leveldb/c.h) only="master/index.c tools/mkindex.c" ;;
	*) return 0 ;;
	esac
	for o in $only; do
		case "$1" in $o) return 0 ;; esac
	done
	echo "layers: $1 includes <$2>; only $only may"
	return 1
}

for f in common/*.[ch] volume/*.[ch] master/*.[ch] s3/*.[ch] ops/*.[ch] tools/*.[ch]; do
	[ -f "$f" ] || continue
	dir=${f%/*}
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$f"); do
		name=${inc#?}
		name=${name%?}
		case "$inc" in
		\<*)
			lib "$f" "$name" || bad=1
			continue ;;
		esac
		# made by the build (tools/version.sh writes $(B)/version.h)
		[ "$f:$name" = common/flags.c:version.h ] && continue
		norm "$dir/$name"
		if [ ! -f "$h" ]; then
			echo "layers: $f includes \"$name\", no file of the tree (a library's header goes in <>)"
			bad=1
		elif ! allowed "$f" "$h"; then
			echo "layers: $f includes \"$name\" ($h), which its layer may not"
			bad=1
		fi
	done
done

[ $bad = 0 ] && echo "layers: every include keeps to its layer"
exit $bad
