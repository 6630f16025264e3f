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
# the browser tests; qemu and busybox-static run the reference kernel with
# sch_netem (lab/vm), user-mode-linux runs it where KVM is missing (the VM
# tests' auto engine), ethtool checks the UML guests' TAPs, iptables drops a
# SYN in the analyzer's handshake test. Installed only
# when missing.
pkgs=()
for want in tcpdump:tcpdump tshark:tshark tcptrace:tcptrace iperf3:iperf3 ping:iputils-ping ip:iproute2 chromium:chromium qemu-system-x86_64:qemu-system-x86 linux.uml:user-mode-linux ethtool:ethtool iptables:iptables; do
	command -v "${want%%:*}" >/dev/null 2>&1 || pkgs+=("${want#*:}")
done
[ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] || pkgs+=(docker.io) # the container topology test
dpkg -s busybox-static >/dev/null 2>&1 || pkgs+=(busybox-static) # the VM's /bin/busybox must be static
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "installing: ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# The reference VM: the newest linux-image-6.1.0-*-cloud-amd64 apt lists,
# unpacked into /var/cache/wanlab/vm with its initramfs (fetched once; later
# runs only rebuild the initramfs), and the engine auto takes (KVM when its
# probe boots, else UML, else emulation).
if ! command -v apt-cache >/dev/null || [ -z "$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64$' 2>/dev/null)" ]; then
	apt-get update -qq
fi
vmbin=$(mktemp -d)
dockerd_pid=
cleanup() {
	rm -rf "$vmbin"
	# Stop the Docker daemon started below (and with it its containerd),
	# by its PID, and wait for it to go.
	if [ -n "$dockerd_pid" ] && kill -0 "$dockerd_pid" 2>/dev/null; then
		kill "$dockerd_pid"
		for _ in $(seq 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.2; done
	fi
}
trap cleanup EXIT

# A Docker daemon of the tests' own (socket, state and exec roots under
# wanlab's names, no iptables rules, no default bridge), for the container
# topology test; stopped on the way out. One left by an interrupted run is
# used as it is.
docker_root=/run/wanlab-docker
export WANLAB_DOCKER=/usr/bin/docker WANLAB_DOCKER_HOST=unix://$docker_root/docker.sock
if ! DOCKER_HOST=$WANLAB_DOCKER_HOST $WANLAB_DOCKER version >/dev/null 2>&1; then
	mkdir -p "$docker_root" /var/lib/wanlab/docker
	rm -f "$docker_root/dockerd.pid"
	/usr/sbin/dockerd --iptables=false --ip6tables=false --bridge=none \
		--data-root /var/lib/wanlab/docker --exec-root "$docker_root/exec" \
		--pidfile "$docker_root/dockerd.pid" -H "$WANLAB_DOCKER_HOST" >"$docker_root/dockerd.log" 2>&1 &
	dockerd_pid=$!
	for _ in $(seq 150); do
		DOCKER_HOST=$WANLAB_DOCKER_HOST $WANLAB_DOCKER version >/dev/null 2>&1 && break
		kill -0 "$dockerd_pid" 2>/dev/null || { echo "dockerd exited:"; tail -5 "$docker_root/dockerd.log"; exit 1; }
		sleep 0.2
	done
fi
CGO_ENABLED=0 go build -trimpath -o "$vmbin/wanlab" ./cmd/wanlab
"$vmbin/wanlab" vm prepare

export WANLAB_REQUIRE_PRIVILEGED=1
go vet ./...
test -z "$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
# The experiments between two VMs (TestVMs on the auto engine, TestVMsTCG)
# run alone after the rest: two guests take both cores while busy, and
# beside another package's tests they would measure the machine instead of
# the scenarios.
go test -count=1 -timeout 10m -skip '^TestVMs' ./... "$@"
go test -count=1 -timeout 4m -run '^TestVMs' ./experiment "$@"
