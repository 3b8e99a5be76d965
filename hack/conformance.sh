#!/usr/bin/env bash
# hack/conformance.sh — Kubernetes' own DNS e2e tests (bin/e2e.test, focus "[sig-network] DNS")
# on the node of hack/node.sh: once with kubetree as the cluster DNS (deploy/ as is), then with
# CoreDNS's in-tree `kubernetes` plugin from the same image (deploy/'s Corefile with the directive
# renamed, as TestNode's side-by-side server), then with kubetree behind NodeLocal DNSCache
# (a new node in node.sh's KUBETREE_NODELOCAL mode: the pods ask the cache on 169.254.20.10, which
# asks kubetree, which runs autopath @kubetree). Writes _out/conformance/results.md (bin/conftable)
# and each run's log and JUnit report under _out/conformance/COLUMN/. `make conformance` builds
# what it needs first.
#
# Environment:
#   KUBETREE_NODE_DIR            the node's DIR (default: a new /tmp/ktconf.XXXXXX, removed at the end;
#                                a node in a DIR that ran before keeps its API objects, edited Corefile
#                                included); the nodelocal column's node runs in DIR-nodelocal
#   KUBETREE_CONFORMANCE_PLUGINS the columns, in order (default "kubetree kubernetes nodelocal"):
#                                kubetree, kubernetes (the in-tree plugin), nodelocal (kubetree behind
#                                NodeLocal DNSCache)
#   KUBETREE_CONFORMANCE_FOCUS   ginkgo --focus (default '\[sig-network\] DNS')
#   KUBETREE_CONFORMANCE_SKIP    ginkgo --skip (default: what one Linux node without a cloud cannot run)
#   KUBETREE_CONFORMANCE_PROCS   ginkgo --procs, the specs run at once (default 4)
#   KUBETREE_CONFORMANCE_KEEP=1  leave the node running at the end (hack/node.sh stop DIR)
#
# Exits non-zero when a test failed in any column (after writing the table).
#
# Needs root (hack/node.sh). Only one node runs per machine: if node.sh says another node runs,
# wait for it to stop and run again.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BIN=$ROOT/bin
DIR= # the running node's (node_up)
OUT=$ROOT/_out/conformance
PLUGINS=${KUBETREE_CONFORMANCE_PLUGINS:-kubetree kubernetes nodelocal}
FOCUS=${KUBETREE_CONFORMANCE_FOCUS:-'\[sig-network\] DNS'}
# [Serial]/[Slow] configMap tests edit the `coredns` ConfigMap of a kubeadm-style cluster (ours is
# `kubetree`); [Feature:...] needs what the feature names (e.g. 5000 services for PerformanceDNS).
SKIP=${KUBETREE_CONFORMANCE_SKIP:-'\[Feature:|\[Serial\]|\[Disruptive\]|\[Flaky\]'}
IMAGES=(agnhost glibc-dns-testing e2e-pause)
# The specs run in parallel processes (ginkgo --procs), as upstream's CI runs them: they mostly wait
# for pods and for DNS answers, and none of those left after SKIP shares state with another.
PROCS=${KUBETREE_CONFORMANCE_PROCS:-4}

log() { echo "conformance.sh: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

for b in e2e.test ginkgo conftable kubectl; do [[ -x $BIN/$b ]] || die "bin/$b missing: make conformance builds it"; done
for i in "${IMAGES[@]}"; do [[ -s $ROOT/_out/images/$i.tar ]] || die "_out/images/$i.tar missing: make conformance-images"; done

# stop_node: at the end, the node stops unless KUBETREE_CONFORMANCE_KEEP=1.
stop_node() {
	[[ -n $DIR ]] || return 0
	if [[ ${KUBETREE_CONFORMANCE_KEEP:-} == 1 ]]; then
		log "node left running: $ROOT/hack/node.sh stop $DIR"
		return
	fi
	stop_dir
}

# stop_dir: the node in DIR stops (one node per machine: before the next starts).
stop_dir() {
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
rm -rf "$OUT"
mkdir -p "$OUT"
trap stop_node EXIT
kubectl_() { "$BIN/kubectl" --cache-dir "$DIR/cp/.kube/cache" "$@"; }

# node_up MODE: a node whose pods ask kubetree directly (MODE direct) or through NodeLocal
# DNSCache (nodelocal), kubetree deployed and the suite's images imported: the node that runs, if
# it has MODE, or else a new one (a DIR's mode is fixed at its first start).
NODE_MODE=
node_up() {
	[[ $NODE_MODE == "$1" ]] && return 0
	[[ -z $NODE_MODE ]] || stop_dir
	if [[ -n ${KUBETREE_NODE_DIR:-} ]]; then
		DIR=$KUBETREE_NODE_DIR
		[[ $1 == direct ]] || DIR=$KUBETREE_NODE_DIR-$1
	else
		DIR=$(mktemp -d /tmp/ktconf.XXXXXX)
	fi
	KUBETREE_NODELOCAL=$([[ $1 == nodelocal ]] && echo 1 || echo 0) "$ROOT/hack/node.sh" start "$DIR"
	"$ROOT/hack/node.sh" deploy "$DIR" >/dev/null
	# shellcheck disable=SC1091
	source "$DIR/env"
	export KUBECONFIG
	for i in "${IMAGES[@]}"; do
		ctr -a "$CONTAINERD_ADDRESS" -n k8s.io images import "$ROOT/_out/images/$i.tar" >/dev/null || die "importing $i failed"
	done
	log "node in $DIR ($1; the kubelet's clusterDNS $CLUSTER_DNS); images: $(ctr -a "$CONTAINERD_ADDRESS" -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"
	NODE_MODE=$1
}

# counter URL NAME: the sum of the metric NAME's samples at URL (a CoreDNS /metrics).
counter() {
	curl -fsS --max-time 5 "$1" | awk -v m="$2" '$1 ~ "^"m"({|$)" { s += $NF } END { printf "%d\n", s }'
}

# through_cache: what the nodelocal column's run cost each side: queries the cache received
# (coredns_dns_requests_total on 169.254.20.10:9253) and queries kubetree's pods received and
# answered through autopath (coredns_autopath_success_total), summed over the pods.
through_cache() {
	local ip ips q=0 a=0
	ips=$(kubectl_ -n kube-system get pods -l app.kubernetes.io/name=kubetree --field-selector=status.phase=Running \
		-o go-template='{{range .items}}{{.status.podIP}} {{end}}')
	for ip in $ips; do
		q=$((q + $(counter "http://$ip:9153/metrics" coredns_dns_requests_total)))
		a=$((a + $(counter "http://$ip:9153/metrics" coredns_autopath_success_total)))
	done
	echo "$(counter "http://$LOCAL_DNS:9253/metrics" coredns_dns_requests_total) $q $a"
}

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
notes=()
failed=() # the columns whose run failed
for p in $PLUGINS; do
	case $p in
	kubetree | kubernetes)
		node_up direct
		use "$p"
		;;
	nodelocal)
		node_up nodelocal
		use kubetree
		before=$(through_cache)
		;;
	*) die "unknown column $p (kubetree, kubernetes, nodelocal)" ;;
	esac
	mkdir -p "$OUT/$p"
	log "running e2e.test (focus $FOCUS, skip $SKIP) with $p; log: $OUT/$p/e2e.log"
	t=$SECONDS
	set +e
	"$BIN/ginkgo" --procs="$PROCS" --focus="$FOCUS" --skip="$SKIP" --no-color -v --timeout=2h \
		--junit-report="$OUT/$p/junit.xml" "$BIN/e2e.test" -- \
		--kubeconfig="$KUBECONFIG" --kubectl-path="$BIN/kubectl" --dns-domain=cluster.local --node-os-distro=debian \
		--report-dir="$OUT/$p" >"$OUT/$p/e2e.log" 2>&1
	rc=$?
	((rc == 0)) || failed+=("$p")
	set -e
	log "$p: e2e.test exited $rc after $((SECONDS - t)) s; $(grep -E '^(Ran|FAIL|SUCCESS)' "$OUT/$p/e2e.log" | tr '\n' ' ')"
	[[ -s $OUT/$p/junit.xml ]] || die "$p: no JUnit report; the end of $OUT/$p/e2e.log:$(echo; tail -n 40 "$OUT/$p/e2e.log")"
	cols+=("$p=$OUT/$p/junit.xml")
	if [[ $p == nodelocal ]]; then
		read -r c0 k0 a0 <<<"$before"
		read -r c1 k1 a1 <<<"$(through_cache)"
		# A column that never went through the cache would be a second kubetree column.
		((c1 > c0)) || die "nodelocal: the cache at $LOCAL_DNS received no query during the run"
		notes+=("- nodelocal: during the run the cache at $LOCAL_DNS received $((c1 - c0)) queries and kubetree $((k1 - k0)), of which autopath answered $((a1 - a0)) (coredns_dns_requests_total and coredns_autopath_success_total, before and after)")
	fi
done

{
	echo "# Kubernetes DNS e2e tests on the kubetree node"
	echo
	echo "- suite: e2e.test from k8s.io/kubernetes $(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$ROOT/hack/tools/go.mod"), focus \`$FOCUS\`, skip \`$SKIP\`, run by ginkgo in $PROCS processes"
	echo "- date: $(date -u +%FT%TZ); commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo ' (with local changes)')"
	echo "- columns: kubetree and kubernetes: the cluster DNS Deployment of deploy/ with the named plugin in its Corefile, asked by the pods directly (clusterDNS 10.96.0.10); nodelocal: kubetree (deploy/nodelocal/kubetree-configmap.yaml: autopath @kubetree, pods verified, client_subnet_from) behind NodeLocal DNSCache (deploy/nodelocal/, clusterDNS 169.254.20.10), on a node of its own"
	echo "- images: agnhost and glibc-dns-testing built here on a Debian 12 userland; upstream agnhost is Alpine (musl): our agnhost's getent, the tests' \"musl\" querier through the C library, is a static musl build (hack/resolvers/getent.c), and dig has its own resolver (hack/CONFORMANCE.md)"
	echo "- total time: $((SECONDS - T0)) s (node start and deploy included)"
	echo
	"$BIN/conftable" -match "$FOCUS" -skip "$SKIP" "${cols[@]}"
	if ((${#notes[@]})); then
		echo
		printf '%s\n' "${notes[@]}"
	fi
} >"$OUT/results.md"
log "results: $OUT/results.md"
cat "$OUT/results.md"
# Every column is run and tabled; then a failed one fails the whole (make conformance, CI).
((${#failed[@]} == 0)) || die "e2e.test failed in: ${failed[*]} (their logs: $OUT/COLUMN/e2e.log)"
