#!/usr/bin/env bash
# Runs the whole test suite (scripts/test.sh) N times on a clean clone of
# the committed HEAD and prints per test: runs, failures, slowest time.
# With --load a busy loop is pinned to CPU 0 all the while, as a background
# build would. Not part of CI: it answers "does the suite pass every time?".
#
#   scripts/soak-tests.sh [-n N] [--load]
#
# The go test -json output of each run, and the captures of the analyzer's
# real-capture tests (WANLAB_KEEP_CAPTURES), stay in a directory printed at
# the end. Exits non-zero when any test failed in any run.
set -euo pipefail

usage() {
	echo "usage: scripts/soak-tests.sh [-n N] [--load]" >&2
	exit 2
}

runs=5
load=false
while [ $# -gt 0 ]; do
	case "$1" in
	-n)
		[ $# -ge 2 ] || usage
		runs=$2
		shift 2
		;;
	-n*)
		runs=${1#-n}
		shift
		;;
	--load)
		load=true
		shift
		;;
	-h | --help) usage ;;
	*) usage ;;
	esac
done
case "$runs" in
'' | *[!0-9]* | 0) usage ;;
esac

if [ "$(id -u)" -ne 0 ]; then
	echo "scripts/soak-tests.sh: run as root (sudo): the suite's namespace tests need CAP_NET_ADMIN" >&2
	exit 3
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
head=$(git -C "$repo" rev-parse HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
	echo "note: uncommitted changes in $repo are not tested (only $head is)" >&2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/wanlab-soak.XXXXXX")
logs=$work/logs
clone=$work/clone
mkdir -p "$logs"

load_pid=
cleanup() {
	if [ -n "$load_pid" ]; then
		kill "$load_pid" 2>/dev/null || true
		wait "$load_pid" 2>/dev/null || true
	fi
	rm -rf "$clone"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

git clone -q --no-checkout "$repo" "$clone"
git -C "$clone" checkout -q --detach "$head"
# The shared captures the tests read stand beside the clone, as in CI.
if [ -d "$repo/../shared" ]; then
	ln -s "$(cd "$repo/../shared" && pwd)" "$work/shared"
fi
echo "soak: $runs run(s) of scripts/test.sh at $(git -C "$clone" log -1 --format='%h %s') in $clone"

if $load; then
	command -v taskset >/dev/null || { echo "scripts/soak-tests.sh: --load needs taskset (util-linux)" >&2; exit 3; }
	# One core busy with user time, as a background compile would be; the
	# tests run on what is left. Its own process, killed by PID at exit.
	taskset -c 0 sh -c 'while :; do :; done' &
	load_pid=$!
	echo "soak: busy loop pinned to CPU 0 (pid $load_pid)"
fi

walls=()
files=()
for i in $(seq 1 "$runs"); do
	t0=$(date +%s)
	rc=0
	# The analyzer's real-capture tests keep their captures there, so a
	# failed comparison can be replayed (go test ./analyzer on the file).
	mkdir -p "$logs/run$i-captures"
	(cd "$clone" && WANLAB_KEEP_CAPTURES="$logs/run$i-captures" ./scripts/test.sh -json) >"$logs/run$i.json" 2>"$logs/run$i.stderr" || rc=$?
	wall=$(($(date +%s) - t0))
	walls+=("${wall}s")
	files+=("$logs/run$i.json")
	echo "soak: run $i/$runs: exit $rc after ${wall}s"
	if [ "$rc" -ne 0 ] && ! grep -q '^{' "$logs/run$i.json"; then
		# Nothing ran (vet, gofmt or an install failed): show why.
		cat "$logs/run$i.stderr" >&2
	fi
done

echo
rc=0
(cd "$clone" && go run ./internal/soakreport "${files[@]}") || rc=$?
echo "soak: wall time per run: ${walls[*]}; load: $load; logs: $logs"
exit "$rc"
