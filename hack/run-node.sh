#!/usr/bin/env bash
# hack/run-node.sh [DIR] — `make run-node`: the node up with kubetree as its DNS, until Ctrl-C;
# then everything is stopped (hack/node.sh stop). DIR defaults to <repo>/_out/node (with
# KUBETREE_NODELOCAL=1, NodeLocal DNSCache in front of kubetree: <repo>/_out/node-nodelocal, as a
# DIR keeps the mode of its first start).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [[ ${KUBETREE_NODELOCAL:-0} == 1 ]]; then DIR=${1:-$ROOT/_out/node-nodelocal}; else DIR=${1:-$ROOT/_out/node}; fi
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
# shellcheck disable=SC1091
source "$DIR/env"
front="the pods ask it at $CLUSTER_DNS"
if [[ $NODELOCAL == 1 ]]; then front="the pods ask NodeLocal DNSCache at $LOCAL_DNS, which asks kubetree"; fi
cat <<-MSG

	kubetree is the cluster DNS of node kubetree-node ($front).
	  export KUBECONFIG=$DIR/cp/kubeconfig PATH=$ROOT/bin:\$PATH
	  kubectl -n kube-system get pods -o wide
	Resolve a name from the client pod (its resolv.conf is the kubelet's):
	  $line
	  kubectl -n baz exec client -- /dnsq -t srv _dns._udp.kube-dns.kube-system.svc.cluster.local
	The Kubernetes docs' "Debugging DNS Resolution" page, as written (pod default/dnsutils):
	  kubectl exec -i -t dnsutils -- nslookup kubernetes.default
	  kubectl exec -ti dnsutils -- cat /etc/resolv.conf
	  kubectl get pods --namespace=kube-system -l k8s-app=kube-dns
	Ctrl-C stops everything.
MSG
while :; do
	sleep 3600 &
	SLEEPER=$!
	wait $SLEEPER
done
