#!/bin/sh
# layers.sh -- fails when a file includes a header its layer may not
# (docs/architecture.md draws the layers).  Run by `make test`.
#
#   common/   its own headers only
#   volume/   common/
#   master/   common/  (the store and the native API)
#   s3/       common/ (the front among it) and master/store.h
#   ops/      common/, master/store.h and master/mkv.h; main.c also s3/s3.h
#
# common/record.h, the index's record codec, only in master/ and common/:
# s3/ and ops/ reach records through store.h.
# and each library's header in one place: microhttpd.h in the front,
# curl.h in the volume client, leveldb/c.h in the index.
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

for f in common/*.[ch] volume/*.[ch] master/*.[ch] s3/*.[ch] ops/*.[ch]; do
	dir=${f%/*}
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		# resolve "../x/y.h" and "y.h" against the file's folder
		case "$inc" in
		../*) h=${inc#../} ;;
		*) h=$dir/$inc ;;
		esac
		if ! allowed "$f" "$h"; then
			echo "layers: $f includes $inc, which its layer may not"
			bad=1
		fi
	done
done

# library headers: each in its one place
lib() {
	for f in $(grep -l "#include <$1>" common/*.[ch] volume/*.[ch] master/*.[ch] s3/*.[ch] ops/*.[ch]); do
		case " $2 " in
		*" $f "*) ;;
		*) echo "layers: $f includes <$1>; only $2 may"; bad=1 ;;
		esac
	done
}
lib microhttpd.h "common/front.c"
lib curl/curl.h "common/httpc.c"
lib leveldb/c.h "master/index.c"

[ $bad = 0 ] && echo "layers: every include keeps to its layer"
exit $bad
