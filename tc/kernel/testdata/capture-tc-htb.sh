#!/bin/sh
# Regenerates tc-htb.txt: the TCA_OPTIONS payload tc sends for htb qdiscs
# ("qdisc ARGS": tc qdisc add dev lo root handle 1: htb ARGS) and classes
# ("class ARGS": tc class add dev lo parent 1: classid 1:N htb ARGS),
# captured with strace in a throwaway network namespace, like
# capture-tc.sh. Run as root here: TC=/path/to/tc sh capture-tc-htb.sh > tc-htb.txt
set -eu
TC=${TC:-tc}
ns=wlcap$$
ip netns add $ns
trap 'ip netns del $ns' EXIT
ip netns exec $ns $TC qdisc add dev lo root handle 1: htb
echo "# tc $($TC -V | sed 's/tc utility, //'), /proc/net/psched $(cat /proc/net/psched)"
echo "# qdisc|class ARGS<TAB>TCA_OPTIONS payload in hex"
n=0
while IFS= read -r line; do
	[ -z "$line" ] && continue
	what=${line%% *}; args=${line#* }
	n=$((n + 1))
	if [ "$what" = qdisc ]; then
		cmd="qdisc add dev lo root handle 2: htb $args"; want=36
	else
		cmd="class add dev lo parent 1: classid 1:$n htb $args"; want=40
	fi
	hex=$(ip netns exec $ns strace -qq -e trace=sendmsg -e write=all -o /dev/stdout \
		$TC $cmd 2>/dev/null |
		sed -n 's/^ | [0-9a-f]*  \(.\{49\}\).*/\1/p' | tr -d ' \n')
	printf '%s\t%s\n' "$line" "$(python3 -c '
import sys, struct
m = bytes.fromhex(sys.argv[1]); want = int(sys.argv[2])
while len(m) >= 16:
    n, t = struct.unpack("<IH", m[:6])
    if t == want:
        break
    m = m[(n + 3) & ~3:]
b = m[16+20:n]
while len(b) >= 4:
    n, t = struct.unpack("<HH", b[:4])
    if t & 0x3fff == 2:
        print(b[4:n].hex()); break
    b = b[(n + 3) & ~3:]
' "$hex" $want)"
done <<'LIST'
qdisc default 2
qdisc r2q 5 default 12 direct_qlen 100
class rate 100mbps ceil 100mbps
class rate 20mbps ceil 20mbps
class rate 50mbps ceil 50mbps
class rate 10mbit ceil 20mbit burst 15kb cburst 30kb prio 1 quantum 3000
class rate 1mbit mtu 9000 mpu 64 overhead 24 linklayer atm
class rate 40gbit ceil 50gbit
class rate 5mbit burst 10kb/8 cburst 20kb/16
LIST
