#!/usr/bin/env bash
# Counts what one op of a Go benchmark executes, by cachegrind (exact
# counts: the machine's steal time does not move them): instructions,
# loads, stores, L1 misses and mispredicted branches per op, of the
# functions whose file path matches PATTERN, the benchmark's set-up
# cancelled by subtracting a run of N1 ops from one of N2.
#
#   scripts/count-instructions.sh PKG BENCH [PATTERN] [N1] [N2]
#   scripts/count-instructions.sh ./analyzer 'AnalyzePacket$' 'wanlab/(analyzer|internal/header)'
#   scripts/count-instructions.sh ./tc/engine 'Pipeline$' 'wanlab/(proxy|internal)' 200000 1200000
#
# PKG may also be a test binary (go test -c), for one built from another
# commit. Needs valgrind (Debian: valgrind).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
pkg=$1 bench=$2 pat=${3:-wanlab/} n1=${4:-100000} n2=${5:-600000}
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is not installed" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -x "$pkg" ] && [ -f "$pkg" ]; then
	bin=$pkg
	dir=$PWD
else
	bin=$work/bench.test
	go test -c -o "$bin" "$pkg"
	dir=$pkg
fi
count() {
	(cd "$dir" && valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes \
		--cachegrind-out-file="$work/cg.$1" "$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" >/dev/null 2>&1)
	cg_annotate --threshold=0 --show=Ir,Dr,Dw,D1mr,D1mw,Bcm --show-percs=no "$work/cg.$1" |
		grep -E "$pat" | grep -v '_test\.go' | grep -v '/synth/' |
		awk '{for (i = 1; i <= 6; i++) { v = $i; gsub(",", "", v); if (v == ".") v = 0; s[i] += v }}
			END {for (i = 1; i <= 6; i++) printf "%d ", s[i]; print ""}'
}
read -r -a a <<<"$(count "$n1")"
read -r -a b <<<"$(count "$n2")"
names=(instructions loads stores L1-read-misses L1-write-misses mispredicts)
for i in "${!names[@]}"; do
	awk -v n="${names[$i]}" -v x="${b[$i]}" -v y="${a[$i]}" -v d=$((n2 - n1)) 'BEGIN {printf "%-16s %9.1f per op\n", n, (x - y) / d}'
done
