#!/usr/bin/env bash
# hack/conformance.sh — Kubernetes' own DNS e2e tests (bin/e2e.test, focus "[sig-network] DNS")
# on the node of hack/node.sh: once with kubetree as the cluster DNS (deploy/ as is), then with
# CoreDNS's in-tree `kubernetes` plugin from the same image (deploy/'s Corefile with the directive
# renamed, as TestNode's side-by-side server). Writes _out/conformance/results.md (bin/conftable)
# and each run's log and JUnit report under _out/conformance/PLUGIN/. `make conformance` builds
# what it needs first.
#
# Environment:
#   KUBETREE_NODE_DIR            the node's DIR (default: a new /tmp/ktconf.XXXXXX, removed at the end;
#                                a node in a DIR that ran before keeps its API objects, edited Corefile included)
#   KUBETREE_CONFORMANCE_PLUGINS the columns, in order (default "kubetree kubernetes")
#   KUBETREE_CONFORMANCE_FOCUS   --ginkgo.focus (default '\[sig-network\] DNS')
#   KUBETREE_CONFORMANCE_SKIP    --ginkgo.skip (default: what one Linux node without a cloud cannot run)
#   KUBETREE_CONFORMANCE_KEEP=1  leave the node running at the end (hack/node.sh stop DIR)
#
# Needs root (hack/node.sh). Only one node runs per machine: if node.sh says another node runs,
# wait for it to stop and run again.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BIN=$ROOT/bin
DIR=${KUBETREE_NODE_DIR:-}
OUT=$ROOT/_out/conformance
PLUGINS=${KUBETREE_CONFORMANCE_PLUGINS:-kubetree kubernetes}
FOCUS=${KUBETREE_CONFORMANCE_FOCUS:-'\[sig-network\] DNS'}
# [Serial]/[Slow] configMap tests edit the `coredns` ConfigMap of a kubeadm-style cluster (ours is
# `kubetree`); [Feature:...] needs what the feature names (e.g. 5000 services for PerformanceDNS).
SKIP=${KUBETREE_CONFORMANCE_SKIP:-'\[Feature:|\[Serial\]|\[Disruptive\]|\[Flaky\]'}
IMAGES=(agnhost glibc-dns-testing e2e-pause)

log() { echo "conformance.sh: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

for b in e2e.test conftable kubectl; do [[ -x $BIN/$b ]] || die "bin/$b missing: make conformance builds it"; done
for i in "${IMAGES[@]}"; do [[ -s $ROOT/_out/images/$i.tar ]] || die "_out/images/$i.tar missing: make conformance-images"; done

stop_node() {
	if [[ ${KUBETREE_CONFORMANCE_KEEP:-} == 1 ]]; then
		log "node left running: $ROOT/hack/node.sh stop $DIR"
		return
	fi
	"$ROOT/hack/node.sh" stop "$DIR" || log "warning: node.sh stop $DIR failed"
	# A DIR of our own goes too (its containerd root holds the images: about 2 GB), unless
	# something is still mounted under it.
	if [[ -z ${KUBETREE_NODE_DIR:-} && -d $DIR ]]; then
		if [[ -z $(awk -v d="$DIR/" 'index($5, d) == 1' /proc/self/mountinfo) ]]; then rm -rf "$DIR"; else
			log "warning: mounts left under $DIR; not removed"
		fi
	fi
}

T0=$SECONDS
[[ -n $DIR ]] || DIR=$(mktemp -d /tmp/ktconf.XXXXXX)
rm -rf "$OUT"
mkdir -p "$OUT"
trap stop_node EXIT
"$ROOT/hack/node.sh" start "$DIR"
"$ROOT/hack/node.sh" deploy "$DIR" >/dev/null
# shellcheck disable=SC1091
source "$DIR/env"
export KUBECONFIG
kubectl_() { "$BIN/kubectl" --cache-dir "$DIR/cp/.kube/cache" "$@"; }
for i in "${IMAGES[@]}"; do
	ctr -a "$CONTAINERD_ADDRESS" -n k8s.io images import "$ROOT/_out/images/$i.tar" >/dev/null || die "importing $i failed"
done
log "images: $(ctr -a "$CONTAINERD_ADDRESS" -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

# serving PLUGIN: every pod of the cluster DNS runs PLUGIN, as its metrics show (kubetree exports
# coredns_kubetree_synced; the in-tree plugin does not), so that a column never names the wrong
# plugin. A pod whose container started before the kubelet refreshed its ConfigMap volume runs the
# Corefile it had (seen on a DIR that ran before: one pod of two still in-tree).
serving() {
	local ips ip m ok=0
	# Pods of the old ReplicaSet still terminating (lameduck) are out of the Service already.
	ips=$(kubectl_ -n kube-system get pods -l app.kubernetes.io/name=kubetree --field-selector=status.phase=Running \
		-o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.status.podIP}} {{end}}{{end}}')
	[[ -n $ips ]] || {
		log "no running pod of the cluster DNS"
		return 1
	}
	for ip in $ips; do
		if ! m=$(curl -fsS --max-time 5 "http://$ip:9153/metrics"); then
			log "metrics of the DNS pod $ip: unreachable"
			ok=1
		elif grep -q '^coredns_kubetree_synced' <<<"$m"; then
			[[ $1 == kubetree ]] || { log "DNS pod $ip serves with kubetree, not $1"; ok=1; }
		else
			[[ $1 != kubetree ]] || { log "DNS pod $ip does not serve with kubetree"; ok=1; }
		fi
	done
	((ok == 0)) && log "DNS pods $ips serve with $1"
	return $ok
}

# use PLUGIN: the cluster DNS serves with PLUGIN (kubetree or kubernetes) in deploy/'s Corefile,
# every pod started with that Corefile.
use() {
	local cur
	cur=$(kubectl_ -n kube-system get configmap kubetree -o 'jsonpath={.data.Corefile}')
	if ! grep -Eq "^ *$1 cluster\.local" <<<"$cur"; then
		kubectl_ -n kube-system get configmap kubetree -o yaml |
			sed -E "s/^( *)(kubetree|kubernetes) cluster\.local/\1$1 cluster.local/" | kubectl_ apply -f - >/dev/null
	elif serving "$1"; then
		return 0
	fi
	# New pods read the ConfigMap as it is now.
	kubectl_ -n kube-system rollout restart deployment/kubetree >/dev/null
	kubectl_ -n kube-system rollout status deployment/kubetree --timeout=180s >&2 || die "kubetree Deployment did not roll out with $1"
	serving "$1" || die "the cluster DNS does not serve with $1 after a rollout restart"
}

cols=()
for p in $PLUGINS; do
	use "$p"
	mkdir -p "$OUT/$p"
	log "running e2e.test (focus $FOCUS, skip $SKIP) with $p; log: $OUT/$p/e2e.log"
	t=$SECONDS
	set +e
	"$BIN/e2e.test" --kubeconfig="$KUBECONFIG" --kubectl-path="$BIN/kubectl" --dns-domain=cluster.local --node-os-distro=debian \
		--ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.no-color --ginkgo.v --ginkgo.timeout=2h \
		--ginkgo.junit-report="$OUT/$p/junit.xml" --report-dir="$OUT/$p" >"$OUT/$p/e2e.log" 2>&1
	rc=$?
	set -e
	log "$p: e2e.test exited $rc after $((SECONDS - t)) s; $(grep -E '^(Ran|FAIL|SUCCESS)' "$OUT/$p/e2e.log" | tr '\n' ' ')"
	[[ -s $OUT/$p/junit.xml ]] || die "$p: no JUnit report; the end of $OUT/$p/e2e.log:$(echo; tail -n 40 "$OUT/$p/e2e.log")"
	cols+=("$p=$OUT/$p/junit.xml")
done

{
	echo "# Kubernetes DNS e2e tests on the kubetree node"
	echo
	echo "- suite: e2e.test from k8s.io/kubernetes $(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$ROOT/hack/tools/go.mod"), focus \`$FOCUS\`, skip \`$SKIP\`"
	echo "- date: $(date -u +%FT%TZ); commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo ' (with local changes)')"
	echo "- columns: the cluster DNS Deployment of deploy/ with the named plugin in its Corefile"
	echo "- images: agnhost and glibc-dns-testing built here on a Debian 12 (glibc) userland; upstream agnhost is Alpine (musl), so the tests' \"musl\" querier runs glibc here (hack/CONFORMANCE.md)"
	echo "- total time: $((SECONDS - T0)) s (node start and deploy included)"
	echo
	"$BIN/conftable" -match "$FOCUS" -skip "$SKIP" "${cols[@]}"
} >"$OUT/results.md"
log "results: $OUT/results.md"
cat "$OUT/results.md"
