#!/usr/bin/env bash
# hack/node.sh — a real single-node Kubernetes cluster on this machine, in which kubetree runs
# as the cluster DNS: etcd + kube-apiserver (hack/cluster.sh), kube-controller-manager,
# kube-scheduler, containerd (Debian's, own root/state/socket), kubelet, bridge CNI on a
# node-local bridge, kube-proxy (iptables), a stand-in upstream resolver (bin/coredns), and an
# OCI registry (the CNCF Distribution registry, bin/registry) that kubetree's release is pushed to
# and pulled from by digest.
#
# Usage:
#   hack/node.sh start DIR    bring the node up (waits until the Node is Ready)
#   hack/node.sh deploy DIR   kubectl apply -f RELEASE/deploy/ (deploy/ with the image pinned by
#                             digest); namespace baz with the client pod dnsq; the
#                             docs' dnsutils pod (default/dnsutils) when its image is built
#   hack/node.sh stop DIR     stop everything; undo every change outside DIR
#   hack/node.sh status DIR   what runs (exit 0 iff everything does)
#
# KUBETREE_RELEASE is the release the node runs (make release; default _out/release/latest): start
# pushes its image index to the node's registry, and containerd pulls it from there by the digest
# its manifests name, as a cluster pulls from its registry. Its IMAGE_REPO must be the node's
# registry, 10.244.0.1:5000 (make release's default).
# KUBETREE_PROXY_MODE=nftables runs kube-proxy in nftables mode (default iptables).
# KUBETREE_NODELOCAL=1 runs NodeLocal DNSCache in front of kubetree (hack/NODE.md): start gives the
# node the link-local address 169.254.20.10 (on an interface of its own) with node-cache's NOTRACK
# rules, and the kubelet's clusterDNS is that address; deploy applies deploy/nodelocal/ (the cache
# DaemonSet, and kubetree's Corefile with autopath behind it) and deploy/pods-verified/. The mode
# is the DIR's: kept in DIR/mode at the first start, later starts of the DIR keep it.
#
# Needs root. Traffic never leaves the machine: pods live on bridge kubetree0 (10.244.0.0/24,
# the node is 10.244.0.1), their only route is to the service range 10.96.0.0/16 via the node,
# nothing is masqueraded to the outside, and forwarding is enabled on kubetree0 only. Names
# outside the cluster go to the stand-in upstream on 10.244.0.1:53, never to this machine's
# resolver. See hack/NODE.md for every system change and how `stop` undoes it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# What it shares with hack/kubeadm-cluster.sh (gone, link_owner, wait_for, nodelocal_address). Its
# own functions below, defined after, are the ones it runs where both have one of a name.
# shellcheck source=hack/lib/node.sh
source "$ROOT/hack/lib/node.sh"
BIN=${KUBETREE_CP_BIN:-$ROOT/bin}
STOP_TIMEOUT=20

BRIDGE=kubetree0
NODE_IP=10.244.0.1
POD_SUBNET=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
KUBE_DNS=10.96.0.10 # the kube-dns Service (deploy/service.yaml)
LOCAL_DNS=169.254.20.10 # NodeLocal DNSCache's address (deploy/nodelocal/)
LOCAL_DNS_IF=nodelocaldns # the interface that holds it, as node-cache names it
NODELOCAL_MARK=KT-NODELOCAL # the comment on our NOTRACK/ACCEPT rules (the cleanup finds them by it)
NODE_NAME=kubetree-node
CGROUP_ROOT=kubetree
GUARD=KT-NODE-GUARD # our own iptables chains (not KUBE-*, so that the cleanup can tell them apart)
CNI_BIN=/usr/lib/cni
PROXY_MODE=${KUBETREE_PROXY_MODE:-iptables} # or nftables (kube-proxy's own table "kube-proxy")
# The node's registry: on the node's own address only, TLS with a certificate of the cluster's CA.
REGISTRY=$NODE_IP:5000
RELEASE=${KUBETREE_RELEASE:-$ROOT/_out/release/latest}
# Imported into containerd (ctr images import): the pause and client images. kubetree's image is
# not: it is pulled from the registry.
IMAGES=(pause dnsq)
# Imported when built (make node-images builds them): the docs' dnsutils pod (started), and the
# resolvers image TestNode asks with glibc, musl, Go and dig.
OPTIONAL_IMAGES=(dnsutils resolvers)
DNSUTILS_IMAGE=registry.k8s.io/e2e-test-images/agnhost:2.39 # the name hack/dnsutils.yaml (the docs') gives

# sysctls that kubelet, kube-proxy or we may change: saved at start, restored at stop.
SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes
	net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding
	net.ipv4.conf.all.route_localnet net.ipv6.conf.all.forwarding net.ipv6.conf.default.forwarding
	net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
	net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
	net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal
	net.netfilter.nf_conntrack_udp_timeout net.netfilter.nf_conntrack_udp_timeout_stream
	fs.inotify.max_user_instances fs.inotify.max_user_watches)

# Paths outside DIR that containerd, the CNI plugins or kubelet create when missing: at stop,
# removed again if they did not exist before start.
HOST_PATHS=(/run/containerd /var/log/containers /var/log/pods /var/lib/cni /var/run/netns
	/usr/libexec/kubernetes /var/lib/kubelet /etc/kubernetes /opt/containerd /opt/cni /etc/cni)

log() { echo "node.sh: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# --------------------------------------------------------------- processes

# argv0 PID: the program a process runs (first word of its command line).
argv0() {
	local a
	a=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline") || return 0
	echo "${a%%$'\n'*}"
}

# Each daemon is started detached (setsid), logs to DIR/log/NAME.log, and is recorded in
# DIR/run/NAME.pid; pid_of checks that the recorded process still runs that binary.
pid_of() {
	local f=$DIR/run/$1.pid pid state
	[[ -s $f ]] || return 0
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 0
	[[ $(argv0 "$pid") == */"$2" ]] || return 0
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
	[[ -n $state && $state != Z ]] || return 0
	echo "$pid"
}

# launch NAME BINARY ARGS...: start BINARY detached as daemon NAME.
launch() {
	local name=$1 bin=$2 pid i
	shift 2
	echo "===== $(date -u +%FT%TZ) node.sh: starting $name" >>"$DIR/log/$name.log"
	setsid "$bin" "$@" </dev/null >>"$DIR/log/$name.log" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$DIR/run/$name.pid"
	for ((i = 0; i < 100; i++)); do
		[[ -n $(pid_of "$name" "$(basename "$bin")") ]] && return 0
		gone "$pid" && break
		sleep 0.05
	done
	gone "$pid" && {
		tail -n 30 "$DIR/log/$name.log" >&2
		die "$name exited at once"
	}
	return 0
}

# pids_by_arg STRING: processes with an argument containing STRING (our DIR's paths), for
# strays whose pid file was lost, and the containerd shims, which containerd starts for us.
pids_by_arg() {
	local p
	for p in /proc/[0-9]*; do
		[[ -r $p/cmdline && ${p#/proc/} != "$$" ]] || continue
		[[ $(tr '\0' '\n' 2>/dev/null <"$p/cmdline") == *"$1"* ]] && echo "${p#/proc/}"
	done
	return 0
}

# stop_proc NAME BINARY [MARKER]: SIGTERM, SIGKILL after STOP_TIMEOUT, wait until gone.
stop_proc() {
	local name=$1 bin=$2 marker=${3:-} pids i
	pids=$({
		pid_of "$name" "$bin"
		[[ -z $marker ]] || for i in $(pids_by_arg "$marker"); do
			if [[ $(argv0 "$i") == */"$bin" ]]; then echo "$i"; fi
		done
	} | sort -u)
	if [[ -z $pids ]]; then
		rm -f "$DIR/run/$name.pid"
		return 0
	fi
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null || true
	for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
		# shellcheck disable=SC2086
		gone $pids && break
		sleep 0.1
	done
	# shellcheck disable=SC2086
	if ! gone $pids; then
		log "$name did not exit after SIGTERM in ${STOP_TIMEOUT}s; SIGKILL"
		kill -KILL $pids 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			gone $pids && break
			sleep 0.1
		done
	fi
	rm -f "$DIR/run/$name.pid"
	log "stopped $name (pid ${pids//$'\n'/ })"
}

# --------------------------------------------------------------- binaries

ensure_built() {
	local b missing=()
	for b in etcd kube-apiserver kubectl kubelet kube-proxy kube-controller-manager kube-scheduler coredns registry release; do
		[[ -x $BIN/$b ]] || missing+=("$b")
	done
	for b in "${IMAGES[@]}"; do
		[[ -s $ROOT/_out/images/$b.tar ]] || missing+=("image $b")
	done
	if ((${#missing[@]})); then
		[[ -z ${KUBETREE_CP_BIN:-} ]] || die "missing in $BIN: ${missing[*]}"
		log "building ${missing[*]} (make node-bins node-images); the first build takes several minutes"
		make -C "$ROOT" control-plane node-bins node-images build bin/registry bin/release >&2 || die "build failed"
	fi
	if [[ ! -s $RELEASE/image.ref && -z ${KUBETREE_RELEASE:-} ]]; then
		log "no release in $RELEASE: make release"
		make -C "$ROOT" release >&2 || die "make release failed"
	fi
	[[ -s $RELEASE/image.ref && -d $RELEASE/image && -d $RELEASE/deploy ]] || die "$RELEASE is not a release (make release)"
	[[ $(<"$RELEASE/image.ref") == "$REGISTRY"/* ]] ||
		die "$RELEASE names $(<"$RELEASE/image.ref"), not the node's registry $REGISTRY: make release IMAGE_REPO=$REGISTRY/kubetree/coredns"
	local c
	for c in containerd runc ctr iptables iptables-save iptables-restore "$CNI_BIN/bridge" "$CNI_BIN/host-local" "$CNI_BIN/loopback"; do
		command -v "$c" >/dev/null ||
			die "$c is missing: make node-deps (apt-get install containerd runc containernetworking-plugins iptables nftables conntrack)"
	done
}

# ----------------------------------------------------------- host changes

# save_host_state: the sysctls and the host paths as they were, once per start from clean.
save_host_state() {
	[[ -s $DIR/host/sysctl.before ]] && return 0
	mkdir -p "$DIR/host"
	local k v p
	: >"$DIR/host/sysctl.before.tmp"
	for k in "${SYSCTLS[@]}"; do
		v=$(sysctl -n "$k" 2>/dev/null) || continue
		printf '%s=%s\n' "$k" "$v" >>"$DIR/host/sysctl.before.tmp"
	done
	: >"$DIR/host/paths.before"
	for p in "${HOST_PATHS[@]}"; do
		[[ -e $p ]] && echo "$p" >>"$DIR/host/paths.before"
	done
	sysctl -a 2>/dev/null | sort >"$DIR/host/sysctl-all.before" || true
	# The netfilter tables that exist now (iptables-nft makes them on first use).
	if command -v nft >/dev/null; then nft list tables >"$DIR/host/nft-tables.before" 2>/dev/null || true; fi
	mv "$DIR/host/sysctl.before.tmp" "$DIR/host/sysctl.before"
}

restore_host_state() {
	[[ -s $DIR/host/sysctl.before ]] || return 0
	local line k v now p
	while IFS= read -r line; do
		k=${line%%=*} v=${line#*=}
		now=$(sysctl -n "$k" 2>/dev/null) || continue
		if [[ $now != "$v" ]]; then
			sysctl -q -w "$k=$v" >/dev/null && log "restored sysctl $k = $v (was $now)"
		fi
	done <"$DIR/host/sysctl.before"
	for p in "${HOST_PATHS[@]}"; do
		grep -Fxq -- "$p" "$DIR/host/paths.before" 2>/dev/null && continue
		[[ -e $p ]] || continue
		if mountpoint -q "$p" 2>/dev/null; then
			log "warning: $p is a mount point; left in place"
			continue
		fi
		rm -rf -- "$p" && log "removed $p (created while the node ran)"
	done
	# Anything else that moved? Compare every sysctl but the counters that move by themselves.
	if [[ -s $DIR/host/sysctl-all.before ]]; then
		local volatile='^(fs\.(dentry-state|file-nr|inode-nr|inode-state|quota)|kernel\.(random|ns_last_pid|pty\.nr|sched_domain|tainted)|net\.netfilter\.nf_conntrack_count|net\.ipv[46]\.(conf|neigh)\.(veth|kubetree0|cni|nodelocaldns)|net\.ipv6\.conf\.(veth|cni)|dev\.|vm\.stat)'
		diff <(grep -Ev "$volatile" "$DIR/host/sysctl-all.before") \
			<(sysctl -a 2>/dev/null | sort | grep -Ev "$volatile") >"$DIR/host/sysctl.diff" 2>&1 || true
		if [[ -s $DIR/host/sysctl.diff ]]; then
			log "warning: sysctls differ from before start (see $DIR/host/sysctl.diff):"
			head -n 20 "$DIR/host/sysctl.diff" >&2
		fi
	fi
	# Tables that iptables-nft made while the node ran and that are empty again.
	local fam t
	if [[ -f $DIR/host/nft-tables.before ]] && command -v nft >/dev/null; then
		while read -r _ fam t; do
			grep -Fxq "table $fam $t" "$DIR/host/nft-tables.before" && continue
			# Empty: nothing but the table, its chains' headers and braces.
			if [[ -z $(nft list table "$fam" "$t" 2>/dev/null | grep -Ev '^\s*(table |chain |type |\}|$)') ]]; then
				nft delete table "$fam" "$t" && log "deleted empty nftables table $fam $t (made by iptables while the node ran)"
			fi
		done < <(nft list tables 2>/dev/null)
	fi
	rm -f "$DIR/host/sysctl.before" "$DIR/host/paths.before" "$DIR/host/sysctl-all.before" "$DIR/host/nft-tables.before"
}

# The apiserver listens on 0.0.0.0 (pods reach it at the node address through the kubernetes
# Service): the guard keeps its port to lo and our bridge (kubelet and the upstream bind the
# bridge address, the rest 127.0.0.1), and keeps the bridge's traffic from being forwarded
# anywhere else.
guard_up() {
	local port=$1
	guard_down
	iptables -w -N "$GUARD-IN"
	iptables -w -A "$GUARD-IN" -i lo -j RETURN
	iptables -w -A "$GUARD-IN" -i "$BRIDGE" -j RETURN
	iptables -w -A "$GUARD-IN" -j DROP
	iptables -w -I INPUT 1 -p tcp --dport "$port" -j "$GUARD-IN"
	iptables -w -N "$GUARD-FWD"
	iptables -w -A "$GUARD-FWD" -i "$BRIDGE" -o "$BRIDGE" -j RETURN
	iptables -w -A "$GUARD-FWD" -i "$BRIDGE" -j DROP
	iptables -w -A "$GUARD-FWD" -o "$BRIDGE" -j DROP
	iptables -w -I FORWARD 1 -j "$GUARD-FWD"
}

# iptables_clean [PATTERN]: every rule and chain matching PATTERN (default: KUBE-*, which are
# kubelet's and kube-proxy's, and ours), in every table of both families; other rules are
# restored untouched.
iptables_clean() {
	local pat=${1:-"KUBE-|$GUARD|$NODELOCAL_MARK"} fam t
	for fam in iptables ip6tables; do
		command -v "$fam-save" >/dev/null || continue
		for t in filter nat mangle raw security; do
			"$fam-save" -t "$t" 2>/dev/null | grep -Eq -- "$pat" || continue
			"$fam-save" -t "$t" | grep -Ev -- "$pat" | "$fam-restore" -w -T "$t" ||
				log "warning: could not clean $fam table $t"
		done
	done
}

guard_down() { iptables_clean "$GUARD"; }

# bridge_owner: the DIR of the node that made the bridge (kept in the link's alias), if any.
bridge_owner() { link_owner "$BRIDGE"; }

bridge_up() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		ip link set "$BRIDGE" alias "$DIR"
		# A bridge whose address was never set takes the lowest of its ports' and changes as
		# ports come and go: when a pod's veth goes, every pod's ARP entry for the gateway is
		# stale, and what the node does not DNAT (NodeLocal DNSCache's address) is flooded to the
		# ports and lost until it is resolved again. Set once, it stays (as the CNI bridge plugin
		# does with isGateway).
		ip link set "$BRIDGE" address "$(<"/sys/class/net/$BRIDGE/address")"
	fi
	# A pod's query to a ClusterIP is DNATed to a pod on the same bridge; the reply is bridged,
	# so it must pass conntrack (br_netfilter) to be un-DNATed. Restored at stop if we set it.
	[[ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]] ||
		die "br_netfilter is not loaded (modprobe br_netfilter): services would not answer pods"
	if [[ $(sysctl -n net.bridge.bridge-nf-call-iptables) != 1 ]]; then
		sysctl -q -w net.bridge.bridge-nf-call-iptables=1
	fi
	ip addr replace "$NODE_IP/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	# Forwarding on our bridge only (a service address DNATed to a pod on the same bridge);
	# never net.ipv4.ip_forward.
	sysctl -q -w "net.ipv4.conf.$BRIDGE.forwarding=1"
}

# nodelocal_up: NodeLocal DNSCache's address on the host (nodelocal_address, hack/lib/node.sh),
# its interface marked as this node's.
nodelocal_up() {
	local owner
	owner=$(link_owner "$LOCAL_DNS_IF")
	[[ -z $owner || $owner == "$DIR" ]] || die "$LOCAL_DNS_IF belongs to the node in $owner"
	iptables_clean "$NODELOCAL_MARK"
	nodelocal_address "$LOCAL_DNS_IF" "$LOCAL_DNS" "$NODELOCAL_MARK"
	ip link set "$LOCAL_DNS_IF" alias "$DIR"
}

nodelocal_down() {
	if ip link show "$LOCAL_DNS_IF" >/dev/null 2>&1; then
		ip link del "$LOCAL_DNS_IF" && log "deleted interface $LOCAL_DNS_IF"
	fi
}

bridge_down() {
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE" && log "deleted bridge $BRIDGE"
	fi
	# veths of pods whose network namespaces are gone disappear with them; any left over:
	local v
	for v in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
		ip link del "$v" 2>/dev/null || true
	done
}

# kubelet wants its cgroup root to exist in every hierarchy (cgroup v1 here); a cpuset cgroup
# needs cpus and mems before anything can join it.
cgroups_up() {
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -f $h/cgroup.procs ]] || continue
		mkdir -p "$h$CGROUP_ROOT"
		if [[ -f $h/cpuset.cpus ]]; then
			[[ -n $(<"$h$CGROUP_ROOT/cpuset.cpus") ]] || cat "$h/cpuset.cpus" >"$h$CGROUP_ROOT/cpuset.cpus"
			[[ -n $(<"$h$CGROUP_ROOT/cpuset.mems") ]] || cat "$h/cpuset.mems" >"$h$CGROUP_ROOT/cpuset.mems"
		fi
	done
}

# ---------------------------------------------------------------- configs

write_configs() {
	local sock=$DIR/containerd/containerd.sock
	mkdir -p "$DIR"/{containerd,cni/net.d,cni/ipam,kubelet/root,kubelet/logs,kubelet/volume-plugins,upstream,etc,registry/data}
	cat >"$DIR/containerd/config.toml" <<-EOF
		version = 2
		root = "$DIR/containerd/root"
		state = "$DIR/containerd/state"
		# Plugins that would write outside DIR or need what this node has not.
		disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
		  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
		  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
		[grpc]
		  address = "$sock"
		[ttrpc]
		  address = ""
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "docker.io/kubetree/pause:1"
		  # root lacks CAP_SYS_RESOURCE here: without this the sandbox fails with
		  # "can't get final child's PID from pipe: EOF".
		  restrict_oom_score_adj = true
		  netns_mounts_under_state_dir = true
		  disable_apparmor = true
		  enable_unprivileged_ports = false
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "$DIR/containerd/runc"
		  [plugins."io.containerd.grpc.v1.cri".registry]
		    # The node's registry and the CA it is trusted by (registry_up).
		    config_path = "$DIR/containerd/certs.d"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$CNI_BIN"
		    conf_dir = "$DIR/cni/net.d"
		    max_conf_num = 1
	EOF
	mkdir -p "$DIR/containerd/certs.d/$REGISTRY"
	cat >"$DIR/containerd/certs.d/$REGISTRY/hosts.toml" <<-EOF
		server = "https://$REGISTRY"
		[host."https://$REGISTRY"]
		  capabilities = ["pull", "resolve"]
		  ca = "$DIR/cp/pki/ca.crt"
	EOF
	# isGateway false: the bridge plugin would turn on net.ipv4.ip_forward; we give the bridge
	# its address ourselves. The pods' only route is to the service range, through the node
	# (and, with NodeLocal DNSCache, to the cache's address on the node).
	cat >"$DIR/cni/net.d/10-kubetree.conflist" <<-EOF
		{
		  "cniVersion": "0.4.0",
		  "name": "kubetree",
		  "plugins": [{
		    "type": "bridge",
		    "bridge": "$BRIDGE",
		    "isGateway": false,
		    "isDefaultGateway": false,
		    "ipMasq": false,
		    "hairpinMode": true,
		    "ipam": {
		      "type": "host-local",
		      "dataDir": "$DIR/cni/ipam",
		      "ranges": [[{"subnet": "$POD_SUBNET", "rangeStart": "10.244.0.16", "rangeEnd": "10.244.0.250", "gateway": "$NODE_IP"}]],
		      "routes": [{"dst": "$SERVICE_CIDR", "gw": "$NODE_IP"}$(((NODELOCAL)) && echo ", {\"dst\": \"$LOCAL_DNS/32\", \"gw\": \"$NODE_IP\"}")]
		    }
		  }]
		}
	EOF
	# What pods with dnsPolicy Default (the kubetree pods) get as resolv.conf: the stand-in.
	echo "nameserver $NODE_IP" >"$DIR/etc/resolv.conf"
	cat >"$DIR/kubelet/config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		# cgroup v1 (hybrid) on this machine: kubelet 1.35+ refuses it unless told.
		failCgroupV1: false
		cgroupDriver: cgroupfs
		cgroupRoot: /$CGROUP_ROOT
		failSwapOn: false
		address: $NODE_IP
		port: 10250
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: 10248
		authentication:
		  anonymous:
		    enabled: true
		  webhook:
		    enabled: false
		authorization:
		  mode: AlwaysAllow
		clusterDomain: cluster.local
		clusterDNS: [$CLUSTER_DNS]
		resolvConf: $DIR/etc/resolv.conf
		containerRuntimeEndpoint: unix://$sock
		imageServiceEndpoint: unix://$sock
		podLogsDir: $DIR/kubelet/logs
		volumePluginDir: $DIR/kubelet/volume-plugins
		makeIPTablesUtilChains: false
		protectKernelDefaults: false
		serializeImagePulls: false
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard:
		  memory.available: 100Mi
		  nodefs.available: 1%
		  nodefs.inodesFree: 1%
		  imagefs.available: 1%
		nodeStatusUpdateFrequency: 4s
		syncFrequency: 10s
		fileCheckFrequency: 10s
	EOF
	cat >"$DIR/kube-proxy.yaml" <<-EOF
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		clientConnection:
		  kubeconfig: $DIR/cp/kubeconfig
		mode: $PROXY_MODE
		hostnameOverride: $NODE_NAME
		bindAddress: $NODE_IP
		clusterCIDR: $POD_SUBNET
		nodePortAddresses: ["$NODE_IP/32"]
		healthzBindAddress: 127.0.0.1:10256
		metricsBindAddress: 127.0.0.1:10249
		oomScoreAdj: 0
		iptables:
		  localhostNodePorts: false
		  masqueradeAll: false
		  minSyncPeriod: 0s
		  syncPeriod: 30s
		# Zero: leave the host's conntrack sysctls alone.
		conntrack:
		  maxPerCore: 0
		  min: 0
		  tcpEstablishedTimeout: 0s
		  tcpCloseWaitTimeout: 0s
		  udpTimeout: 0s
		  udpStreamTimeout: 0s
	EOF
	# The stand-in upstream: the only resolver outside the cluster that pods ever reach.
	cat >"$DIR/upstream/example.test.zone" <<-EOF
		\$ORIGIN example.test.
		@   60 IN SOA ns.example.test. hostmaster.example.test. 1 7200 1800 86400 30
		@   60 IN NS  ns.example.test.
		ns  60 IN A   198.51.100.2
		www 60 IN A   198.51.100.7
		api 60 IN A   198.51.100.8
	EOF
	cat >"$DIR/upstream/Corefile" <<-EOF
		# Names outside the cluster, as the world would answer them (TEST-NET-2, never contacted).
		example.test:53 {
		    bind $NODE_IP
		    errors
		    file $DIR/upstream/example.test.zone
		}
		# Every other name: NXDOMAIN. Nothing is asked beyond this machine.
		.:53 {
		    bind $NODE_IP
		    errors
		    template ANY ANY {
		        rcode NXDOMAIN
		    }
		}
	EOF
}

# ---------------------------------------------------------------- waiting

ctr_() { ctr -a "$DIR/containerd/containerd.sock" -n k8s.io "$@"; }
kubectl_() { "$BIN/kubectl" --kubeconfig "$DIR/cp/kubeconfig" --cache-dir "$DIR/cp/.kube/cache" "$@"; }

node_ready() {
	[[ $(kubectl_ get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

# ------------------------------------------------------------------ verbs

cmd_start() {
	T0=$SECONDS
	# One node per machine: the bridge, the addresses and the ports are fixed.
	local owner
	owner=$(bridge_owner)
	if [[ -n $owner && $owner != "$DIR" ]]; then
		die "another node runs (or was not stopped) in $owner: hack/node.sh stop $owner"
	fi
	ensure_built
	mkdir -p "$DIR"/{log,run}
	save_host_state
	write_configs
	bridge_up
	if ((NODELOCAL)); then nodelocal_up; fi

	# containerd first: it starts while the control plane does.
	if [[ -z $(pid_of containerd containerd) ]]; then
		# Nothing of ours runs: addresses left in the IPAM store are stale.
		rm -rf "$DIR/cni/ipam" && mkdir -p "$DIR/cni/ipam"
		launch containerd "$(command -v containerd)" --config "$DIR/containerd/config.toml"
	fi

	# Control plane: the apiserver must be reachable from pods (kubernetes Service ->
	# NODE_IP), and needs the ServiceAccount admission plugin (token volumes).
	KUBETREE_SA_ADMISSION=1 KUBETREE_APISERVER_ARGS="--bind-address=0.0.0.0 --advertise-address=$NODE_IP --endpoint-reconciler-type=lease --kubelet-preferred-address-types=InternalIP" \
		"$ROOT/hack/cluster.sh" start "$DIR/cp"
	local port
	port=$(sed -n 's/^APISERVER_PORT=//p' "$DIR/cp/ports")
	guard_up "$port"

	if [[ -z $(pid_of upstream coredns) ]]; then
		launch upstream "$BIN/coredns" -conf "$DIR/upstream/Corefile"
	fi

	registry_up
	wait_for 30 "containerd is up" ctr_ version || die "containerd did not start: $DIR/log/containerd.log"
	local img
	for img in "${IMAGES[@]}"; do
		ctr_ images import "$ROOT/_out/images/$img.tar" >/dev/null || die "importing $img failed"
	done
	for img in "${OPTIONAL_IMAGES[@]}"; do
		[[ -s $ROOT/_out/images/$img.tar ]] || continue
		ctr_ images import "$ROOT/_out/images/$img.tar" >/dev/null || die "importing $img failed"
	done
	log "images imported: $(ctr_ images ls -q | grep kubetree | tr '\n' ' '); kubetree's is pulled from $REGISTRY: $(<"$RELEASE/image.ref")"

	local kc=$DIR/cp/kubeconfig pki=$DIR/cp/pki
	if [[ -z $(pid_of kube-controller-manager kube-controller-manager) ]]; then
		launch kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$kc" \
			--authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
			--bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
			--use-service-account-credentials=false --service-account-private-key-file="$pki/sa.key" \
			--root-ca-file="$pki/ca.crt" --service-cluster-ip-range="$SERVICE_CIDR" \
			--cert-dir="$DIR/kcm-certs" --flex-volume-plugin-dir="$DIR/kcm-flex"
	fi
	if [[ -z $(pid_of kube-scheduler kube-scheduler) ]]; then
		launch kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$kc" \
			--authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
			--bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --cert-dir="$DIR/scheduler-certs"
	fi
	cgroups_up
	if [[ -z $(pid_of kubelet kubelet) ]]; then
		# A Node left from an earlier start may still say Ready, and its pods hold addresses
		# the wiped IPAM store no longer knows: the kubelet registers it anew.
		kubectl_ delete node "$NODE_NAME" --ignore-not-found --wait=false >/dev/null
		launch kubelet "$BIN/kubelet" --config="$DIR/kubelet/config.yaml" --kubeconfig="$kc" \
			--root-dir="$DIR/kubelet/root" --cert-dir="$DIR/kubelet/pki" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP"
	fi
	if [[ -z $(pid_of kube-proxy kube-proxy) ]]; then
		launch kube-proxy "$BIN/kube-proxy" --config="$DIR/kube-proxy.yaml"
	fi
	wait_for 90 "node $NODE_NAME is Ready" node_ready || {
		tail -n 30 "$DIR/log/kubelet.log" >&2
		die "node $NODE_NAME not Ready within 90 s"
	}
	{
		printf 'KUBECONFIG=%q\n' "$DIR/cp/kubeconfig"
		printf 'NODE_NAME=%q\nNODE_IP=%q\nCLUSTER_DNS=%q\nKUBE_DNS=%q\n' "$NODE_NAME" "$NODE_IP" "$CLUSTER_DNS" "$KUBE_DNS"
		printf 'NODELOCAL=%q\nLOCAL_DNS=%q\n' "$NODELOCAL" "$LOCAL_DNS"
		printf 'CONTAINERD_ADDRESS=%q\n' "$DIR/containerd/containerd.sock"
		printf 'UPSTREAM=%q\n' "$NODE_IP:53"
		printf 'REGISTRY=%q\nRELEASE=%q\nKUBETREE_IMAGE=%q\n' "$REGISTRY" "$RELEASE" "$(<"$RELEASE/image.ref")"
	} >"$DIR/env"
	log "node up in $((SECONDS - T0)) s ($(((NODELOCAL)) && echo "NodeLocal DNSCache at $LOCAL_DNS" || echo "cluster DNS $KUBE_DNS")); KUBECONFIG=$DIR/cp/kubeconfig (env: $DIR/env)"
}

# registry_up: the node's registry (CNCF Distribution) on REGISTRY, serving TLS with a certificate
# the cluster's CA signed (containerd trusts that CA for it: certs.d), and the release pushed to it.
registry_up() {
	local pki=$DIR/registry/pki ca=$DIR/cp/pki
	if [[ ! -s $pki/registry.crt ]]; then
		mkdir -p "$pki" && chmod 700 "$pki"
		(
			set -e
			cd "$pki"
			exec 2>openssl.log
			cat >registry.ext <<-EOF
				basicConstraints=critical,CA:FALSE
				keyUsage=critical,digitalSignature,keyEncipherment
				extendedKeyUsage=serverAuth
				subjectAltName=IP:$NODE_IP
			EOF
			openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout registry.key \
				-out registry.csr -subj "/CN=kubetree-node-registry"
			openssl x509 -req -in registry.csr -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAserial "$ca/ca.srl" \
				-days 3650 -extfile registry.ext -out registry.crt
			rm -f registry.csr
			chmod 600 registry.key
		) || {
			cat "$pki/openssl.log" >&2 || true
			die "making the registry's certificate in $pki failed"
		}
	fi
	cat >"$DIR/registry/config.yml" <<-EOF
		version: 0.1
		log:
		  level: info
		  formatter: text
		storage:
		  filesystem:
		    rootdirectory: $DIR/registry/data
		http:
		  addr: $REGISTRY
		  tls:
		    certificate: $pki/registry.crt
		    key: $pki/registry.key
	EOF
	if [[ -z $(pid_of registry registry) ]]; then
		# No traces exported: there is nowhere to send them, and the exporter would keep trying.
		OTEL_TRACES_EXPORTER=none launch registry "$BIN/registry" serve "$DIR/registry/config.yml"
	fi
	wait_for 30 "the registry answers on $REGISTRY" curl -fsS -o /dev/null --cacert "$ca/ca.crt" "https://$REGISTRY/v2/" ||
		die "the registry did not start: $DIR/log/registry.log"
	local want got
	want=$(<"$RELEASE/image.ref")
	got=$("$BIN/release" push -layout "$RELEASE/image" -to "${want%@*}:$(<"$RELEASE/VERSION")" -ca "$ca/ca.crt") ||
		die "pushing $RELEASE to $REGISTRY failed"
	[[ $got == "$want" ]] || die "the registry serves $got, the release's manifests name $want"
	log "registry $REGISTRY serves $got"
}

cmd_deploy() {
	T0=$SECONDS
	[[ -s $DIR/env ]] || die "start the node first: $0 start $DIR"
	if ((NODELOCAL)); then
		# The cache runs in the host's network, which only the privileged Pod Security level
		# allows; kubetree's pods are still checked against restricted (warnings).
		kubectl_ label --overwrite ns kube-system pod-security.kubernetes.io/enforce=privileged \
			pod-security.kubernetes.io/warn=restricted >/dev/null
		# deploy/nodelocal/ holds kubetree's Corefile for behind the cache: it goes in first, and
		# deploy/configmap.yaml not at all, so that kubetree's pods start with it.
		local f manifests=()
		for f in "$RELEASE"/deploy/*.yaml; do
			[[ $f == */configmap.yaml ]] || manifests+=(-f "$f")
		done
		kubectl_ apply -f "$RELEASE/deploy/pods-verified/" -f "$RELEASE/deploy/nodelocal/" >&2
		kubectl_ apply "${manifests[@]}" >&2
	else
		# Pods in kube-system must pass the restricted Pod Security Standard: enforce it there.
		kubectl_ label --overwrite ns kube-system pod-security.kubernetes.io/enforce=restricted >/dev/null
		kubectl_ apply -f "$RELEASE/deploy/" >&2
	fi
	# The docs' dnsutils pod ("Debugging DNS Resolution"), when its image was imported.
	local dnsutils=0
	if ctr_ images ls -q | grep -Fx "$DNSUTILS_IMAGE" >/dev/null; then
		kubectl_ apply -f "$ROOT/hack/dnsutils.yaml" >&2
		dnsutils=1
	fi
	# The client pod starts while kubetree rolls out.
	kubectl_ create ns baz --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
	kubectl_ label --overwrite ns baz pod-security.kubernetes.io/enforce=restricted >/dev/null
	kubectl_ apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: Pod
		metadata:
		  name: client
		  namespace: baz
		spec:
		  terminationGracePeriodSeconds: 1
		  securityContext:
		    runAsNonRoot: true
		    runAsUser: 65532
		    seccompProfile: {type: RuntimeDefault}
		  containers:
		  - name: dnsq
		    image: kubetree/dnsq:1
		    imagePullPolicy: Never
		    args: ["-t", "sleep"]
		    securityContext:
		      allowPrivilegeEscalation: false
		      readOnlyRootFilesystem: true
		      capabilities: {drop: ["ALL"]}
	EOF
	kubectl_ -n kube-system rollout status deployment/kubetree --timeout=120s >&2 ||
		die "kubetree did not roll out"
	if ((NODELOCAL)); then
		kubectl_ -n kube-system rollout status daemonset/node-local-dns --timeout=120s >&2 ||
			die "node-local-dns did not roll out"
	fi
	kubectl_ -n baz wait --for=condition=Ready pod/client --timeout=60s >&2 || die "client pod not Ready"
	if ((dnsutils)); then
		kubectl_ wait --for=condition=Ready pod/dnsutils --timeout=60s >&2 || die "dnsutils pod not Ready"
	fi
	log "kubetree$(((NODELOCAL)) && echo ", node-local-dns") and baz/client$(((dnsutils)) && echo ", default/dnsutils") ready ($((SECONDS - T0)) s)"
	echo "KUBECONFIG=$DIR/cp/kubeconfig $BIN/kubectl -n baz exec client -- /dnsq kubernetes.default"
}

cmd_stop() {
	[[ -d $DIR ]] || {
		log "nothing to stop: $DIR does not exist"
		return 0
	}
	mkdir -p "$DIR/run"
	stop_proc kube-controller-manager kube-controller-manager "$DIR/cp/kubeconfig"
	stop_proc kube-scheduler kube-scheduler "$DIR/cp/kubeconfig"
	stop_proc kubelet kubelet "$DIR/kubelet/config.yaml"
	stop_proc kube-proxy kube-proxy "$DIR/kube-proxy.yaml"
	# Containers: kill every task, then containerd, then its shims (started with our socket).
	local sock=$DIR/containerd/containerd.sock id
	if [[ -n $(pid_of containerd containerd) ]]; then
		for id in $(ctr_ tasks ls -q 2>/dev/null); do
			ctr_ tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_ tasks ls -q 2>/dev/null); do
			ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
		done
	fi
	stop_proc containerd containerd "$DIR/containerd/config.toml"
	local shims p
	shims=$(for p in $(pids_by_arg "$sock"); do
		if [[ $(argv0 "$p") == *containerd-shim* ]]; then echo "$p"; fi
	done)
	if [[ -n $shims ]]; then
		# shellcheck disable=SC2086
		kill -KILL $shims 2>/dev/null || true
		log "killed containerd shims: ${shims//$'\n'/ }"
	fi
	# Container processes whose shim is gone: in our cgroup tree.
	local cg
	for cg in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
		[[ -d $cg ]] || continue
		find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -KILL 2>/dev/null || true
	done
	stop_proc upstream coredns "$DIR/upstream/Corefile"
	stop_proc registry registry "$DIR/registry/config.yml"
	"$ROOT/hack/cluster.sh" stop "$DIR/cp" 2>&1 | sed 's/^/  /' >&2 || true

	# Mounts under DIR (overlay rootfs, shm, network namespaces, kubelet volumes), deepest first.
	local m
	for ((p = 0; p < 3; p++)); do
		for m in $(awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
	done
	[[ -z $(awk -v d="$DIR/" 'index($5, d) == 1' /proc/self/mountinfo) ]] || log "warning: mounts left under $DIR"
	# The cgroups kubelet made under each hierarchy, deepest first.
	for cg in /sys/fs/cgroup/*/"$CGROUP_ROOT" /sys/fs/cgroup/"$CGROUP_ROOT"; do
		[[ -d $cg ]] || continue
		find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[[ -d $cg ]] && log "warning: cgroup $cg left (busy)"
	done
	# The bridge, the KUBE-* rules and the conntrack entries are the machine's one node's: when
	# another DIR's node owns them (a start here refused because that node runs), leave them.
	local owner
	owner=$(bridge_owner)
	if [[ -n $owner && $owner != "$DIR" ]]; then
		log "the node of $owner owns $BRIDGE, the host's KUBE-* rules and sysctls: left to it"
		rm -f "$DIR/env"
		log "stopped"
		return 0
	fi
	# kube-proxy's own cleanup (KUBE-* in iptables and nftables), then anything KUBE-* left
	# (kubelet's canaries), our guard chains, the bridge, the sysctls and host paths.
	if [[ -x $BIN/kube-proxy ]]; then
		"$BIN/kube-proxy" --cleanup --config="$DIR/kube-proxy.yaml" >>"$DIR/log/kube-proxy-cleanup.log" 2>&1 || true
	fi
	iptables_clean
	nodelocal_down
	# Connection tracking entries of our addresses (they would only time out).
	if command -v conntrack >/dev/null; then
		conntrack -D -s "$POD_SUBNET" >/dev/null 2>&1 || true
		conntrack -D -d "$POD_SUBNET" >/dev/null 2>&1 || true
		conntrack -D -d "$SERVICE_CIDR" >/dev/null 2>&1 || true
	fi
	bridge_down
	restore_host_state
	rm -f "$DIR/env"
	log "stopped"
}

cmd_status() {
	local rc=0 n b p
	for n in upstream:coredns registry:registry containerd:containerd kube-controller-manager:kube-controller-manager \
		kube-scheduler:kube-scheduler kubelet:kubelet kube-proxy:kube-proxy; do
		p=$(pid_of "${n%%:*}" "${n#*:}")
		if [[ -n $p ]]; then echo "${n%%:*}: running (pid $p)"; else
			echo "${n%%:*}: stopped"
			rc=1
		fi
	done
	"$ROOT/hack/cluster.sh" status "$DIR/cp" || rc=1
	if ((NODELOCAL)); then
		if ip -br addr show "$LOCAL_DNS_IF" 2>/dev/null | grep -qF "$LOCAL_DNS/32"; then echo "$LOCAL_DNS_IF: $LOCAL_DNS"; else
			echo "$LOCAL_DNS_IF: missing"
			rc=1
		fi
	fi
	return $rc
}

# ------------------------------------------------------------------- main

(($# == 2)) || usage
VERB=$1
[[ -n $2 ]] || usage
((EUID == 0)) || die "needs root (containerd, kubelet, iptables, a bridge)"
if [[ $VERB == start ]]; then mkdir -p "$2"; fi
if [[ -d $2 ]]; then DIR=$(cd "$2" && pwd -P); else DIR=$2; fi
# The containerd socket path must fit a sockaddr_un (108 bytes).
((${#DIR} < 70)) || die "DIR path too long for containerd's socket: $DIR"

if [[ -d $DIR ]]; then
	exec 9>"$DIR/.lock"
	flock -w 300 9 || die "another node.sh holds $DIR/.lock"
fi

# The DIR's mode, fixed at its first start: the kubelet's clusterDNS, the pods' routes and what
# deploy applies follow from it.
NODELOCAL=0
if [[ -s $DIR/mode ]]; then
	[[ $(<"$DIR/mode") == nodelocal ]] && NODELOCAL=1
	if [[ $VERB == start && -n ${KUBETREE_NODELOCAL:-} && ${KUBETREE_NODELOCAL:-} != "$NODELOCAL" ]]; then
		die "$DIR runs with KUBETREE_NODELOCAL=$NODELOCAL (DIR/mode): stop it and start a new DIR"
	fi
elif [[ $VERB == start ]]; then
	[[ ${KUBETREE_NODELOCAL:-0} == 1 ]] && NODELOCAL=1
	if ((NODELOCAL)); then echo nodelocal >"$DIR/mode"; else echo direct >"$DIR/mode"; fi
fi
if ((NODELOCAL)); then CLUSTER_DNS=$LOCAL_DNS; else CLUSTER_DNS=$KUBE_DNS; fi

case $VERB in
start) cmd_start ;;
deploy) cmd_deploy ;;
stop) cmd_stop ;;
status) cmd_status ;;
*) usage ;;
esac
