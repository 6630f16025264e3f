#!/usr/bin/env bash
# The project's test command: installs what the tests compare against and
# runs every test, privileged ones included (run as root; under CI a
# privileged test that cannot run fails instead of skipping).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "scripts/test.sh: run as root (sudo): the namespace tests need CAP_NET_ADMIN" >&2
	exit 3
fi

# Debian packages the tests use as references (tcpdump, tshark, tcptrace)
# and for sanity checks (ping, iperf3); chromium drives the HTML report in
# the browser tests. Installed only when missing.
pkgs=()
for want in tcpdump:tcpdump tshark:tshark tcptrace:tcptrace iperf3:iperf3 ping:iputils-ping ip:iproute2 chromium:chromium; do
	command -v "${want%%:*}" >/dev/null 2>&1 || pkgs+=("${want#*:}")
done
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "installing: ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

export WANLAB_REQUIRE_PRIVILEGED=1
go vet ./...
test -z "$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
go test -count=1 -timeout 14m ./... "$@"
