#!/usr/bin/env bash
# Builds the wanlab container image offline: a static wanlab binary and
# Debian's busybox-static on an empty base (container/Dockerfile); docker
# build never pulls. Usage: scripts/build-image.sh [TAG] (default wanlab:dev).
# DOCKER (default docker) and DOCKER_HOST are honoured.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-wanlab:dev}
docker=${DOCKER:-docker}
busybox=/bin/busybox
if [ ! -x "$busybox" ] || ! dpkg -s busybox-static >/dev/null 2>&1; then
	echo "scripts/build-image.sh: needs Debian's busybox-static (apt-get install busybox-static)" >&2
	exit 3
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$ctx/wanlab" ./cmd/wanlab
cp "$busybox" "$ctx/busybox"
cp container/Dockerfile "$ctx/Dockerfile"
"$docker" build --pull=false -q -t "$tag" "$ctx" >/dev/null
echo "$tag"
