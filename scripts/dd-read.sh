#!/usr/bin/env bash
# Reads one 512 MiB file cold in 256 KiB reads, through the page cache and with O_DIRECT, and
# prints each read's time (the system time is the kernel's cost of the read).
#   scripts/dd-read.sh DIR   (DIR on the file system of the data directory; needs root to drop caches)
set -euo pipefail
dir=${1:?directory}
f="$dir/dd-read-$$.bin"
trap 'rm -f "$f"' EXIT
dd if=/dev/urandom of="$f" bs=1M count=512 oflag=direct status=none
for round in 1 2 3; do
	for mode in buffered direct; do
		sync
		echo 3 >/proc/sys/vm/drop_caches
		flag=""
		[[ $mode == direct ]] && flag="iflag=direct"
		echo "round $round, $mode:"
		( time dd if="$f" of=/dev/null bs=256K $flag status=none ) 2>&1 | sed 's/^/  /'
	done
done
