#!/usr/bin/env bash
# hack/run-node.sh [DIR] — `make run-node`: the node up with kubetree as its DNS, until Ctrl-C;
# then everything is stopped (hack/node.sh stop). DIR defaults to <repo>/_out/node.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
DIR=${1:-$ROOT/_out/node}
SLEEPER=
stop() {
	trap - INT TERM EXIT
	[[ -z $SLEEPER ]] || kill "$SLEEPER" 2>/dev/null || true
	echo
	"$ROOT/hack/node.sh" stop "$DIR"
}
trap stop INT TERM EXIT
"$ROOT/hack/node.sh" start "$DIR"
line=$("$ROOT/hack/node.sh" deploy "$DIR")
cat <<-MSG

	kubetree is the cluster DNS of node kubetree-node.
	  export KUBECONFIG=$DIR/cp/kubeconfig
	  $ROOT/bin/kubectl -n kube-system get pods -o wide
	Resolve a name from the client pod (its resolv.conf is the kubelet's):
	  $line
	  $ROOT/bin/kubectl -n baz exec client -- /dnsq -t srv _dns._udp.kube-dns.kube-system.svc.cluster.local
	Ctrl-C stops everything.
MSG
while :; do
	sleep 3600 &
	SLEEPER=$!
	wait $SLEEPER
done
