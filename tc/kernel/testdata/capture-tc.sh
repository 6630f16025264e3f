#!/bin/sh
# Regenerates tc-options.txt: for each spec stage in the list below, the
# TCA_OPTIONS payload that iproute2's tc sends to the kernel, captured with
# strace in a throwaway network namespace (the kernel may refuse the qdisc,
# e.g. netem where sch_netem is missing: the bytes are sent all the same).
# Run as root from this directory: sh capture-tc.sh > tc-options.txt
# TC names the tc binary (iproute2 6.10 or later for netem's 64-bit
# latency attributes; the golden file was made with tc built from
# iproute2's main branch); TC_LIB_DIR, where the .dist tables are.
set -eu
TC=${TC:-tc}
export TC_LIB_DIR=${TC_LIB_DIR:-/usr/lib/x86_64-linux-gnu/tc}
ns=wlcap$$
ip netns add $ns
trap 'ip netns del $ns' EXIT
echo "# tc $($TC -V | sed 's/tc utility, //'), /proc/net/psched $(cat /proc/net/psched)"
echo "# stage<TAB>TCA_OPTIONS payload in hex"
while IFS= read -r stage; do
	[ -z "$stage" ] && continue
	kind=${stage%% *}; args=${stage#* }
	hex=$(ip netns exec $ns strace -qq -e trace=sendmsg -e write=all -o /dev/stdout \
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
tbf rate 50mbit burst 50kb limit 500kb
tbf rate 100mbit burst 64kb limit 1mb
tbf rate 1gbit burst 256kb limit 4mb
tbf rate 8kbit burst 4kb limit 8kb
tbf rate 10mbit burst 10kb latency 50ms
tbf rate 100mbit burst 64kb latency 20ms peakrate 200mbit mtu 1500
tbf rate 1mbit burst 32kb limit 64kb mpu 64
tbf rate 40gbit burst 1mb limit 16mb
tbf rate 100mbit burst 64kb/8 limit 1mb
tbf rate 2mbit burst 16kb limit 32kb overhead 24 linklayer atm
netem loss 1%
netem loss 0.3% 25%
netem loss 10% ecn
netem duplicate 1%
netem corrupt 0.1%
netem corrupt 5% 25%
netem loss state 1%
netem loss state 1% 10% 5% 80% 1%
netem loss gemodel 1% 10% 70% 0.1%
netem loss gemodel 5%
netem rate 1mbit
netem rate 5mbit 20 100 5
netem rate 6gbit
netem slot 1ms 5ms packets 10 bytes 64kb
netem slot 800us
netem limit 50 loss 2%
netem delay 100ms
netem delay 100ms 10ms 25%
netem delay 10ms reorder 25% 50% gap 5
netem delay 20ms 5ms distribution normal
netem delay 20ms 5ms distribution pareto loss 1% 30%
netem delay 20ms 5ms distribution paretonormal
netem delay 5s 3s
netem loss 1% seed 42
netem rate 40gbit
netem slot distribution normal 2ms 1ms packets 4
netem delay 100ms loss 0.5% duplicate 1% corrupt 0.1% reorder 2% rate 100mbit
LIST
