#!/bin/bash
# disk full at restart: kill -9 while the index's disk is full, restart, free, restart
set -u
B=${MKV_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$(mktemp -d /tmp/atk40fr.XXXX)
mkdir $D/db $D/vol
mount -t tmpfs -o size=2m tmpfs $D/db
$B/bin/mkv-volume -port 24881 $D/vol >$D/vol.log 2>&1 & VP=$!
$B/bin/mkv -volumes 127.0.0.1:24881 -replicas 1 -db $D/db -port 24880 server >$D/m1.log 2>&1 & MP=$!
sleep 1.5
ack=()
for i in $(seq -w 0 19); do [ "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -d a$i localhost:24880/a$i)" = 201 ] && ack+=(a$i); done
dd if=/dev/zero of=$D/db/filler bs=64k >/dev/null 2>&1; dd if=/dev/zero of=$D/db/filler bs=1 oflag=append conv=notrunc >/dev/null 2>&1
for i in $(seq -w 0 99); do c=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -d b$i localhost:24880/b$i); [ $c = 201 ] && ack+=(b$i); [ $c != 201 ] && break; done
echo "acked ${#ack[@]}; first refusal $c"
kill -9 $MP; wait $MP 2>/dev/null
df -k $D/db | tail -1
$B/bin/mkv -volumes 127.0.0.1:24881 -replicas 1 -db $D/db -port 24880 server >$D/m2.log 2>&1 & MP=$!
sleep 2
if kill -0 $MP 2>/dev/null; then echo "restart on a full disk: running"; curl -s -o /dev/null -w "PUT on full disk after restart: %{http_code}\n" -X PUT -d z localhost:24880/z; kill -9 $MP; wait $MP 2>/dev/null; else wait $MP; echo "restart on a full disk: exited $?"; fi
tail -2 $D/m2.log
ls $D/db
rm $D/db/filler
$B/bin/mkv -volumes 127.0.0.1:24881 -replicas 1 -db $D/db -port 24880 server >$D/m3.log 2>&1 & MP=$!
sleep 1.5
lost=0; for k in "${ack[@]}"; do [ "$(curl -s -L -o /dev/null -w '%{http_code}' localhost:24880/$k)" = 200 ] || { lost=$((lost+1)); echo "LOST $k"; }; done
echo "lost $lost of ${#ack[@]}"
kill $MP $VP; wait
umount $D/db; rm -rf $D
