#!/bin/bash
# 16 writers while the index's log write fails, heals; kill -9; every 201 must read back
set -u
B=${MKV_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$(mktemp -d /tmp/atk40c.XXXX); mkdir $D/vol
$B/bin/mkv-volume -port 24891 $D/vol >$D/vol.log 2>&1 & VP=$!
LD_PRELOAD=$B/build/tests/faultfs.so MKV_FAULT_DIR=$D/db MKV_FAULT_CTL=$D/ctl $B/bin/mkv -volumes 127.0.0.1:24891 -replicas 1 -db $D/db -port 24890 server >$D/m1.log 2>&1 & MP=$!
sleep 1.5
w() { for i in $(seq 1 400); do k=w$1-$i; c=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -d $k localhost:24890/$k); [ "$c" = 201 ] && echo $k >> $D/ack.$1; [ -e $D/stop ] && break; done; }
for j in $(seq 1 16); do w $j & done
sleep 1; echo write > $D/ctl; sleep 0.3; rm $D/ctl; sleep 2; echo write > $D/ctl; sleep 3; rm $D/ctl; sleep 2
kill -9 $MP; touch $D/stop; wait $MP 2>/dev/null
sleep 1; wait $(jobs -p | grep -v $VP) 2>/dev/null
$B/bin/mkv -volumes 127.0.0.1:24891 -replicas 1 -db $D/db -port 24890 server >$D/m2.log 2>&1 & MP=$!
sleep 1.5
n=0; lost=0; for k in $(cat $D/ack.*); do n=$((n+1)); [ "$(curl -s -L -o /dev/null -w '%{http_code}' localhost:24890/$k)" = 200 ] || { lost=$((lost+1)); echo LOST $k; }; done
echo "acked $n lost $lost"; grep -c "refuses\|writable again" $D/m1.log
kill $MP $VP; wait 2>/dev/null; rm -rf $D
