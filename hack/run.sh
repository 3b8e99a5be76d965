#!/usr/bin/env bash
# hack/run.sh — `make run`: serve cluster DNS with bin/coredns on 127.0.0.1:1053.
# It starts the local control plane (hack/cluster.sh) with examples/cluster.yaml and touches nothing
# else, whatever KUBECONFIG says; RUN_KUBECONFIG=FILE serves that cluster instead, read-only.
# Ctrl-C stops everything this script started.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
RUN_DIR=${KUBETREE_RUN_DIR:-$ROOT/_out/run}
KUBECTL=$ROOT/bin/kubectl

started_cluster=""
coredns_pid=""
cleanup() {
	trap - EXIT INT TERM
	if [[ -n $coredns_pid ]]; then
		kill "$coredns_pid" 2>/dev/null || true
		wait "$coredns_pid" 2>/dev/null || true
	fi
	if [[ -n $started_cluster ]]; then
		hack/cluster.sh stop "$RUN_DIR" || true
	fi
	echo "run.sh: stopped" >&2
}
trap cleanup EXIT INT TERM

if [[ -n ${RUN_KUBECONFIG:-} ]]; then
	export KUBECONFIG=$RUN_KUBECONFIG
	"$KUBECTL" --request-timeout=5s get --raw /readyz >/dev/null ||
		{ echo "run.sh: RUN_KUBECONFIG=$RUN_KUBECONFIG: its API server is not ready (above)" >&2; exit 1; }
	echo "run.sh: serving the cluster of RUN_KUBECONFIG=$RUN_KUBECONFIG" >&2
else
	hack/cluster.sh start "$RUN_DIR"
	started_cluster=1
	export KUBECONFIG=$RUN_DIR/kubeconfig
	"$KUBECTL" apply -f examples/cluster.yaml
fi

bin/coredns -conf examples/Corefile &
coredns_pid=$!
# Ready in 30 s, or a failure: never a prompt
# for a server that does not answer.
ready=""
for _ in $(seq 1 300); do
	curl -fsS http://127.0.0.1:18181/ready >/dev/null 2>&1 && { ready=1; break; }
	kill -0 "$coredns_pid" 2>/dev/null || { echo "run.sh: coredns exited (its log is above)" >&2; exit 1; }
	sleep 0.1
done
[[ -n $ready ]] || { echo "run.sh: coredns did not become ready in 30 s (http://127.0.0.1:18181/ready; its log is above)" >&2; exit 1; }

cat <<MSG

kubetree is serving cluster DNS on 127.0.0.1:1053 (UDP and TCP); KUBECONFIG=$KUBECONFIG
Try (dig is in Debian's dnsutils package):

  dig @127.0.0.1 -p 1053 web.demo.svc.cluster.local A
  dig @127.0.0.1 -p 1053 api.demo.svc.cluster.local AAAA
  dig @127.0.0.1 -p 1053 db.demo.svc.cluster.local A
  dig @127.0.0.1 -p 1053 _pg._tcp.db.demo.svc.cluster.local SRV
  dig @127.0.0.1 -p 1053 db-0.db.demo.svc.cluster.local AAAA
  dig @127.0.0.1 -p 1053 search.demo.svc.cluster.local CNAME
  dig @127.0.0.1 -p 1053 -x 10.244.2.10
  dig @127.0.0.1 -p 1053 +tcp dns-version.cluster.local TXT
  curl -s http://127.0.0.1:19153/metrics | grep kubetree

Change the cluster and watch DNS follow: $KUBECTL --kubeconfig $KUBECONFIG -n demo ...
Ctrl-C stops CoreDNS$( [[ -n $started_cluster ]] && echo " and the local control plane" ).
MSG
wait "$coredns_pid"
