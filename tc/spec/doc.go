// Package spec is wanlab's impairment language: tc-netem(8) and tc-tbf(8)
// argument syntax, stages joined by "|", parsed exactly as iproute2's
// q_netem.c and q_tbf.c parse it and printed back in canonical tc form.
//
// A spec is a pipeline, root first; "netem" may be left out for the first
// stage:
//
//	delay 100ms | tbf rate 50mbit burst 50kb limit 500kb
//
// is the netem root qdisc with a tbf child of
//
//	tc qdisc add dev ens3 root handle 1:0 netem delay 100ms
//	tc qdisc add dev ens3 parent 1:1 handle 10:0 tbf rate 50mbit burst 50kb limit 500kb
//
// netem takes limit PACKETS; delay|latency TIME [JITTER [CORRELATION]];
// distribution uniform|normal|pareto|paretonormal; loss|drop [random]
// PERCENT [CORRELATION], loss state P13 [P31 [P32 [P23 [P14]]]] or loss
// gemodel P [R [1-H [1-K]]]; ecn; duplicate, corrupt and reorder PERCENT
// [CORRELATION]; gap DISTANCE; rate RATE [PACKETOVERHEAD [CELLSIZE
// [CELLOVERHEAD]]]; slot MIN [MAX] or slot distribution TYPE DELAY JITTER,
// each with [packets N] [bytes SIZE]; seed VALUE. tbf takes rate RATE;
// burst|buffer|maxburst SIZE[/CELL]; limit SIZE or latency TIME; peakrate
// RATE with mtu|minburst SIZE[/CELL]; mpu SIZE; overhead BYTES; linklayer
// ethernet|atm|adsl.
//
// Units are iproute2's (package units): netem times with a bare number in
// nanoseconds (get_time64), tbf latency in microseconds (get_time), rates
// in bit or byte forms with SI and IEC prefixes, sizes in bytes with
// binary prefixes, percentages with or without "%". Errors are
// *ParseError values naming the token and its position.
package spec
