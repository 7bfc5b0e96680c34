#!/bin/bash
D=$(mktemp -d /tmp/atk40s.XXXX); mkdir $D/db
mount -t tmpfs -o size=2m tmpfs $D/db
ASAN_OPTIONS=detect_leaks=1:exitcode=23:quarantine_size_mb=64 timeout 5 ${MKV_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}/build-san/bin/mkv -volumes 127.0.0.1:1 -replicas 1 -db $D/db -port 24899 server 2>&1 | head -5
df -k $D/db | tail -1; ls -la $D/db
umount $D/db; rm -rf $D
