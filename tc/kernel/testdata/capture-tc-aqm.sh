#!/bin/sh
# Regenerates tc-aqm-options.txt: for each queue discipline stage below,
# the TCA_OPTIONS payload iproute2's tc sends, captured with strace in a
# throwaway network namespace of its own (unshare -n: gone when tc exits;
# the kernel may lack the qdisc and refuse it, the bytes are sent all the
# same). Run as root from this directory: sh capture-tc-aqm.sh > tc-aqm-options.txt
set -eu
TC=${TC:-tc}
echo "# tc $($TC -V | sed 's/tc utility, //'), /proc/net/psched $(cat /proc/net/psched)"
echo "# stage<TAB>TCA_OPTIONS payload in hex"
while IFS= read -r stage; do
	[ -z "$stage" ] && continue
	kind=${stage%% *}; args=${stage#"$kind"}
	hex=$(unshare -n strace -qq -e trace=sendmsg -e write=all -o /dev/stdout \
		$TC qdisc add dev lo root handle 1: $kind $args 2>/dev/null |
		sed -n 's/^ | [0-9a-f]*  \(.\{49\}\).*/\1/p' | tr -d ' \n')
	printf '%s\t%s\n' "$stage" "$(python3 -c '
import sys, struct
m = bytes.fromhex(sys.argv[1])
while len(m) >= 16:  # find RTM_NEWQDISC (36) among the messages sent
    n, t = struct.unpack("<IH", m[:6])
    if t == 36:
        break
    m = m[(n + 3) & ~3:]
b = m[16+20:n]  # after nlmsghdr and tcmsg
while len(b) >= 4:
    n, t = struct.unpack("<HH", b[:4])
    if t & 0x3fff == 2:
        print(b[4:n].hex()); break
    b = b[(n + 3) & ~3:]
' "$hex")"
done <<'LIST'
pfifo limit 100
bfifo limit 150kb
codel
codel limit 500 target 2ms interval 50ms ecn ce_threshold 1ms
codel target 2500 interval 30ms
fq_codel
fq_codel limit 1000 flows 64 quantum 300 target 10ms interval 50ms noecn memory_limit 4mb drop_batch 8
fq_codel ce_threshold 3ms
pie
pie limit 500 target 20ms tupdate 30ms alpha 4 beta 30 ecn bytemode dq_rate_estimator
red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 ecn adaptive bandwidth 10mbit
red limit 1mb avpkt 1500
red limit 500kb min 20kb max 100kb avpkt 1000 probability 0.1 bandwidth 100mbit ecn harddrop
red limit 500kb avpkt 1500 ecn nodrop
LIST
