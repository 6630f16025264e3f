#!/usr/bin/env bash
# Writes cmd/wanlab/default.pgo, the CPU profile from which `go build`
# optimises the wanlab binary (profile-guided optimisation: the Go
# compiler inlines the calls the profile shows hot, so the per-packet
# paths, split into small functions to be read, run as one). `go build`,
# `go run` and `go install` of ./cmd/wanlab use it without a flag.
#
# The profile is what the binary spends its time on: `wanlab analyze` of
# a 1 GB bulk transfer (CSV and JSON) and of 20,000 short connections
# (JSON, text), captures written by the analyzer's test helper; the
# forwarding engine's benchmarks (impairment pipelines, class trees);
# and, run as root, the proxy forwarding a bulk TCP transfer between two
# network namespaces of its own through TUN devices. Every part is run
# from a binary built without a profile.
#
#   scripts/pgo-profile.sh          (from the repository's root)
#
# Re-run it after a change to a hot path; a stale profile still works,
# it only optimises less.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -pgo=off -o "$work/wanlab" ./cmd/wanlab
WANLAB_SYNTH_DIR=$work go test -pgo=off -count=1 -run "^TestWriteProfileCaptures$" ./analyzer
for i in 1 2 3 4 5; do
	"$work/wanlab" analyze --format csv --cpuprofile "$work/prof.bulk-csv.$i" "$work/bulk.pcap" >/dev/null
	"$work/wanlab" analyze --format json --cpuprofile "$work/prof.bulk-json.$i" "$work/bulk.pcap" >/dev/null
	"$work/wanlab" analyze --format json --cpuprofile "$work/prof.many-json.$i" "$work/many.pcap" >/dev/null
	"$work/wanlab" analyze --cpuprofile "$work/prof.many-text.$i" "$work/many.pcap" >/dev/null
done
go test -pgo=off -count=1 -run '^$' -bench 'Pipeline' -benchtime 0.1s -o "$work/engine.test" \
	-cpuprofile "$work/prof.engine" ./tc/engine
go test -pgo=off -count=1 -run '^$' -bench 'PipelineClasses' -benchtime 0.1s -o "$work/htb.test" \
	-cpuprofile "$work/prof.htb" ./tc/htb
if [ "$(id -u)" = 0 ]; then
	go test -pgo=off -count=1 -run '^$' -bench 'TCPBulk/(offload|water)' -benchtime 50x -o "$work/proxy.test" \
		-cpuprofile "$work/prof.proxy" ./proxy
else
	echo "pgo-profile: not root, the proxy's forwarding between namespaces is left out" >&2
fi
go tool pprof -proto "$work"/prof.* >"$work/default.pgo"
mv "$work/default.pgo" cmd/wanlab/default.pgo
echo "wrote cmd/wanlab/default.pgo ($(wc -c <cmd/wanlab/default.pgo) bytes)"
