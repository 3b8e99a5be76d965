#!/usr/bin/env bash
# hack/kubeadm-cluster.sh — a kubeadm cluster of several nodes on this machine (issue 38), built
# from source and pulled from a registry of ours: `kubeadm init` on the first node (the control
# plane as static pods: kube-apiserver, kube-controller-manager, kube-scheduler, etcd), `kubeadm
# join` on the others, kube-proxy as kubeadm's DaemonSet, kubeadm's CoreDNS addon. Every image is
# built here (hack/cluster.mk, bin/mkimage) and pushed to a CNCF Distribution registry (bin/registry)
# that kubeadm's imageRepository names.
#
# Usage:
#   hack/kubeadm-cluster.sh up [DIR]       bring the cluster up; waits for every node Ready and every
#                                          kube-system pod Ready; prints KUBECONFIG
#   hack/kubeadm-cluster.sh down [DIR]     stop everything; undo every change outside DIR
#   hack/kubeadm-cluster.sh status [DIR]   what runs (exit 0 iff everything does)
#   hack/kubeadm-cluster.sh kubeadm DIR N ARGS...
#                                          kubeadm ARGS in node N (1 is the control plane), as
#                                          an operator runs it there (kubeadm upgrade)
#   hack/kubeadm-cluster.sh node-stop DIR N
#                                          node N lost: its kubelet, containerd, containers and
#                                          namespaces killed, as a machine that fails (make rollouts)
#   hack/kubeadm-cluster.sh node-start DIR N
#                                          node N back, as it boots again; waits until it is Ready
#   hack/kubeadm-cluster.sh nodelocal [DIR]
#                                          NodeLocal DNSCache's address 169.254.20.10 on every
#                                          node, with node-cache's NOTRACK rules (the cache itself,
#                                          deploy/nodelocal/, is the caller's to apply); a node
#                                          started again gets it too (make rollouts)
#
# DIR defaults to _out/cluster. KUBETREE_CLUSTER_NODES (default 2, at most 9) is the number of
# nodes; KUBETREE_PROXY_MODE=nftables runs kube-proxy in nftables mode (default iptables).
#
# Each node is a network namespace and a mount namespace of this machine (persisted as files under
# DIR/ns), with its own containerd (root, state and socket under DIR/nodes/NODE) and kubelet (cgroup
# root /ktc/NODE). In its mount namespace /etc, /usr and /var are overlays whose upper layers are
# under DIR/nodes/NODE/overlay (kubeadm's /etc/kubernetes and /var/lib/kubelet land there, and so
# does everything the kubelet creates), and /run is a tmpfs of its own (containerd's /run/containerd):
# nothing is written to the host's own directories.
#
# Addresses (nothing of hack/node.sh's: its bridge kubetree0, 10.244.0.0/24, 10.96.0.0/16): bridge
# ktc0 with 10.250.0.1/24 (the host: the registry on :5000, the stand-in upstream resolver on :53),
# node N at 10.250.0.(10+N) (veth ktcvN on ktc0, eth0 in the node), pods 10.251.0.0/16 (a /24 per
# node, allocated by the controller-manager), services 10.252.0.0/16 (cluster DNS 10.252.0.10).
# The nodes have no default route; traffic stays on ktc0; nothing is masqueraded. See hack/CLUSTER.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=hack/lib/node.sh
source "$ROOT/hack/lib/node.sh"
BIN=${KUBETREE_CP_BIN:-$ROOT/bin}
IMAGES=$ROOT/_out/cluster-images

NODES=${KUBETREE_CLUSTER_NODES:-2}
PROXY_MODE=${KUBETREE_PROXY_MODE:-iptables}
BRIDGE=ktc0
HOST_IP=10.250.0.1
NODE_NET=10.250.0.0/24
POD_CIDR=10.251.0.0/16
SERVICE_CIDR=10.252.0.0/16
CLUSTER_DNS=10.252.0.10 # kubeadm's: the tenth address of the service subnet
LOCAL_DNS=169.254.20.10 # NodeLocal DNSCache's address (deploy/nodelocal/), with verb nodelocal
LOCAL_DNS_IF=nodelocaldns # the interface that holds it, as node-cache names it
NODELOCAL_MARK=KTC-NODELOCAL # the comment on its rules
API_PORT=6443
REGISTRY=$HOST_IP:5000
REPO=$REGISTRY/kubeadm # kubeadm's imageRepository
CGROUP_PARENT=ktc
GUARD=KTC-GUARD # the host's INPUT from ktc0 (our chain, in both families)
CNI_BIN=/usr/lib/cni
# What the kubelets change on the host (not namespaced): saved at up, restored at down.
SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

log() { echo "kubeadm-cluster: $*" >&2; }
die() {
	log "error${STEP:+ in step \"$STEP\"}: $*"
	exit 1
}
usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

node_name() { echo "ktc-$1"; }
node_ip() { echo "10.250.0.$((10 + $1))"; }
node_dir() { echo "$DIR/nodes/$(node_name "$1")"; }
netns() { echo "$DIR/ns/$(node_name "$1").net"; }
mntns() { echo "$DIR/ns/$(node_name "$1").mnt"; }

# in_node N COMMAND...: COMMAND in node N's network and mount namespaces.
in_node() {
	local n=$1
	shift
	nsenter --net="$(netns "$n")" --mount="$(mntns "$n")" -- "$@"
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" "$@"; }

# step NAME: what the cluster is doing now (a failure names it).
step() {
	STEP=$1
	log "step: $1 ($((SECONDS - T0)) s)"
}

# ---------------------------------------------------------- namespaces

# ns_inode FILE: the inode of the namespace a file holds (as /proc/PID/ns/* name it).
ns_inode() { stat -L -c %i "$1" 2>/dev/null || true; }

# ns_pids KIND FILE: the processes in the namespace FILE holds (KIND net or mnt).
ns_pids() {
	local ino
	ino=$(ns_inode "$2")
	[[ -n $ino ]] || return 0
	find /proc -mindepth 3 -maxdepth 3 -path "/proc/[0-9]*/ns/$1" -lname "$1:\[$ino\]" 2>/dev/null | cut -d/ -f3
}

# ns_up N: node N's namespaces, its link to the bridge, its overlays.
ns_up() {
	local n=$1 nd name ip d
	nd=$(node_dir "$n") name=$(node_name "$n") ip=$(node_ip "$n")
	if ! mountpoint -q "$DIR/ns"; then
		# The namespace files must sit on a private mount (a mount namespace bound under a shared
		# one would propagate into itself).
		mkdir -p "$DIR/ns"
		mount --bind "$DIR/ns" "$DIR/ns"
		mount --make-private "$DIR/ns"
	fi
	if ! mountpoint -q "$(netns "$n")" || ! mountpoint -q "$(mntns "$n")"; then
		umount "$(netns "$n")" "$(mntns "$n")" 2>/dev/null || true
		for d in etc usr var; do
			rm -rf "$nd/overlay/$d/work"
			mkdir -p "$nd/overlay/$d/upper" "$nd/overlay/$d/work"
		done
		touch "$(netns "$n")" "$(mntns "$n")"
		local m hosts=()
		for ((m = 1; m <= NODES; m++)); do hosts+=("$(node_ip "$m") $(node_name "$m")"); done
		unshare --net="$(netns "$n")" --mount="$(mntns "$n")" --propagation private -- bash -euc '
			mount -t tmpfs -o mode=0755 ktc-run /run
			for d in etc usr var; do
				mount -t overlay "ktc-$d" -o "lowerdir=/$d,upperdir=$1/overlay/$d/upper,workdir=$1/overlay/$d/work" "/$d"
			done
			# The node has no init system (this script supervises its kubelet): without systemctl,
			# kubeadm says so instead of asking the host'"'"'s systemctl to restart a kubelet service.
			rm -f /usr/bin/systemctl /bin/systemctl
			# The node'"'"'s own resolver is the stand-in upstream, never the host'"'"'s; the nodes know
			# each other by name (kubeadm'"'"'s preflight looks its node name up).
			rm -f /etc/resolv.conf
			echo "nameserver $2" >/etc/resolv.conf
			printf "%s\n" "${@:3}" >>/etc/hosts' _ "$nd" "$HOST_IP" "${hosts[@]}" || die "making node $name's namespaces failed"
	fi
	if ! ip link show "ktcv$n" >/dev/null 2>&1; then
		nsenter --net="$(netns "$n")" ip link add eth0 type veth peer name "ktcv$n" netns $$
		ip link set "ktcv$n" alias "$DIR"
	fi
	ip link set "ktcv$n" master "$BRIDGE"
	ip link set "ktcv$n" up
	nsenter --net="$(netns "$n")" bash -euc '
		ip link set lo up
		ip addr replace "$1/24" dev eth0
		ip link set eth0 up
		# Inside the node only: its pods are routed through it (the host keeps ip_forward 0).
		sysctl -q -w net.ipv4.ip_forward=1
		# A reply from a pod on the node'"'"'s own bridge to a pod that asked a ClusterIP must be
		# un-DNATed: bridged traffic goes through the node'"'"'s iptables.
		sysctl -q -w net.bridge.bridge-nf-call-iptables=1
		# A route to the Service range, as a default route gives a real node one: a process in the
		# node'"'"'s own network (NodeLocal DNSCache asking kube-dns-upstream) needs a route before
		# kube-proxy'"'"'s DNAT, or its connect fails at once (network unreachable). A packet that no
		# rule DNATs finds no neighbour on ktc0 and is dropped there.
		ip route replace "$2" dev eth0' _ "$ip" "$SERVICE_CIDR" ||
		die "configuring node $name's network failed"
}

# bridge_up: the host's bridge, on which the nodes meet; the host is HOST_IP on it.
bridge_up() {
	local owner
	owner=$(link_owner "$BRIDGE")
	[[ -z $owner || $owner == "$DIR" ]] || die "bridge $BRIDGE belongs to the cluster in $owner (hack/kubeadm-cluster.sh down $owner)"
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
	ip addr replace "$HOST_IP/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	guard_up
}

# guard_up: what the nodes and their pods may reach on the host: the registry and the stand-in
# upstream, and replies to what the host asked them (kubectl to the API server). Without it a node
# reaches whatever the host listens on at 0.0.0.0 or [::].
guard_up() {
	guard_down
	local fam
	for fam in iptables ip6tables; do
		"$fam" -w -N "$GUARD"
		"$fam" -w -A "$GUARD" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
	done
	iptables -w -A "$GUARD" -d "$HOST_IP" -p tcp --dport 5000 -j RETURN
	iptables -w -A "$GUARD" -d "$HOST_IP" -p udp --dport 53 -j RETURN
	iptables -w -A "$GUARD" -d "$HOST_IP" -p tcp --dport 53 -j RETURN
	iptables -w -A "$GUARD" -p icmp -j RETURN
	# Neighbour discovery, nothing else over IPv6 (the bridge has a link-local address only).
	ip6tables -w -A "$GUARD" -p ipv6-icmp -j RETURN
	for fam in iptables ip6tables; do
		"$fam" -w -A "$GUARD" -j DROP
		"$fam" -w -I INPUT 1 -i "$BRIDGE" -j "$GUARD"
	done
}

guard_down() {
	local fam
	for fam in iptables ip6tables; do
		while "$fam" -w -D INPUT -i "$BRIDGE" -j "$GUARD" 2>/dev/null; do :; done
		if "$fam" -w -n -L "$GUARD" >/dev/null 2>&1; then
			"$fam" -w -F "$GUARD" && "$fam" -w -X "$GUARD"
		fi
	done
}

# ------------------------------------------------------------- host state

save_host_state() {
	[[ -s $DIR/host/sysctl.before ]] && return 0
	mkdir -p "$DIR/host"
	local k v
	for k in "${SYSCTLS[@]}"; do
		v=$(sysctl -n "$k" 2>/dev/null) || continue
		printf '%s=%s\n' "$k" "$v"
	done >"$DIR/host/sysctl.tmp"
	mv "$DIR/host/sysctl.tmp" "$DIR/host/sysctl.before"
}

# restore_host_state: the kernel settings the kubelets changed, unless a kubelet of someone else
# (hack/node.sh's) still runs: it wants them as they are. The saved values are then kept, so that
# the next down (or the next up's save, which keeps them) still knows what the host had: deleting
# them here once left the kubelets' values as the host's for good.
restore_host_state() {
	[[ -s $DIR/host/sysctl.before ]] || return 0
	local others
	others=$(pgrep -x kubelet | tr '\n' ' ' || true)
	if [[ -n $others ]]; then
		log "another kubelet runs (pid $others): the kernel settings kubelets change are left to it; what the host had stays in $DIR/host/sysctl.before for the next down"
		return 0
	else
		local line k v now
		while IFS= read -r line; do
			k=${line%%=*} v=${line#*=}
			now=$(sysctl -n "$k" 2>/dev/null) || continue
			if [[ $now != "$v" ]]; then
				sysctl -q -w "$k=$v" >/dev/null && log "restored sysctl $k = $v (was $now)"
			fi
		done <"$DIR/host/sysctl.before"
	fi
	rm -f "$DIR/host/sysctl.before"
}

# --------------------------------------------------------------- configs

write_node_configs() {
	local n=$1 nd name sock
	nd=$(node_dir "$n") name=$(node_name "$n")
	sock=$nd/containerd/containerd.sock
	mkdir -p "$nd"/{containerd,cni/net.d,cni/ipam,patches}
	cat >"$nd/containerd/config.toml" <<-EOF
		version = 2
		root = "$nd/containerd/root"
		state = "$nd/containerd/state"
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
		  # kubeadm's pause image, from our registry.
		  sandbox_image = "$(grep '/pause:' "$DIR/kubeadm/images")"
		  # root lacks CAP_SYS_RESOURCE here (hack/NODE.md).
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
		        Root = "$nd/containerd/runc"
		  [plugins."io.containerd.grpc.v1.cri".registry]
		    config_path = "$nd/containerd/certs.d"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$CNI_BIN"
		    conf_dir = "$nd/cni/net.d"
		    max_conf_num = 1
	EOF
	registry_hosts "$nd/containerd/certs.d" "$REGISTRY" "$DIR/registry/pki/ca.crt"
	# What differs from node to node in the kubelet's configuration: kubeadm applies it on top of
	# the cluster's KubeletConfiguration (patches, target kubeletconfiguration).
	cat >"$nd/patches/kubeletconfiguration+merge.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		cgroupRoot: /$CGROUP_PARENT/$name
	EOF
	# What systemd does for a kubeadm node (kubelet.service and its 10-kubeadm.conf drop-in):
	# run the kubelet with kubeadm's files once they exist, and restart it when it exits.
	cat >"$nd/kubelet.sh" <<-EOF
		#!/usr/bin/env bash
		while :; do
		  if [[ -s /var/lib/kubelet/config.yaml && -s /var/lib/kubelet/kubeadm-flags.env ]] &&
		    [[ -s /etc/kubernetes/kubelet.conf || -s /etc/kubernetes/bootstrap-kubelet.conf ]]; then
		    KUBELET_KUBEADM_ARGS=
		    source /var/lib/kubelet/kubeadm-flags.env
		    echo "===== \$(date -u +%FT%TZ) kubelet \$KUBELET_KUBEADM_ARGS"
		    # shellcheck disable=SC2086
		    "$BIN/kubelet" --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
		      --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml \$KUBELET_KUBEADM_ARGS
		    echo "===== \$(date -u +%FT%TZ) kubelet exited: \$?"
		  fi
		  sleep 1
		done
	EOF
}

# write_kubeadm_configs: kubeadm's configuration of the cluster and of the first node.
write_kubeadm_configs() {
	local nd1 token
	nd1=$(node_dir 1)
	mkdir -p "$DIR/kubeadm"
	echo "nameserver $HOST_IP" >"$DIR/resolv.conf"
	if [[ ! -s $DIR/kubeadm/token ]]; then "$BIN/kubeadm" token generate >"$DIR/kubeadm/token"; fi
	token=$(<"$DIR/kubeadm/token")
	cat >"$DIR/kubeadm/init.yaml" <<-EOF
		apiVersion: kubeadm.k8s.io/v1beta4
		kind: InitConfiguration
		bootstrapTokens:
		- token: "$token"
		  ttl: 24h0m0s
		localAPIEndpoint:
		  advertiseAddress: $(node_ip 1)
		  bindPort: $API_PORT
		nodeRegistration:
		  name: $(node_name 1)
		  criSocket: unix://$nd1/containerd/containerd.sock
		  imagePullPolicy: IfNotPresent
		  kubeletExtraArgs:
		  - name: node-ip
		    value: $(node_ip 1)
		  ignorePreflightErrors: [$PREFLIGHT_IGNORE]
		patches:
		  directory: $nd1/patches
		# On a loaded 2-core machine the control plane takes minutes to answer (kubeadm's default
		# for API calls is 1 min).
		timeouts:
		  controlPlaneComponentHealthCheck: 10m0s
		  kubeletHealthCheck: 5m0s
		  kubernetesAPICall: 5m0s
		  etcdAPICall: 5m0s
		  tlsBootstrap: 10m0s
		---
		apiVersion: kubeadm.k8s.io/v1beta4
		kind: ClusterConfiguration
		clusterName: kubetree-kubeadm
		kubernetesVersion: $K8S_VERSION
		imageRepository: $REPO
		controlPlaneEndpoint: $(node_ip 1):$API_PORT
		networking:
		  dnsDomain: cluster.local
		  podSubnet: $POD_CIDR
		  serviceSubnet: $SERVICE_CIDR
		controllerManager:
		  extraArgs:
		  # Not /usr/libexec/kubernetes (the node's /usr is an overlay; keep it to /var/lib/kubelet).
		  - name: flex-volume-plugin-dir
		    value: /var/lib/kubelet/volumeplugins
		---
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		# cgroup v1 (hybrid) on this machine: kubelet 1.35+ refuses it unless told.
		failCgroupV1: false
		cgroupDriver: cgroupfs
		failSwapOn: false
		# The stand-in upstream: what pods with dnsPolicy Default (CoreDNS) get as resolv.conf.
		resolvConf: $DIR/resolv.conf
		volumePluginDir: /var/lib/kubelet/volumeplugins
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
		---
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		mode: $PROXY_MODE
		nodePortAddresses: ["$NODE_NET"]
		iptables:
		  localhostNodePorts: false
		# Zero: leave the host's conntrack sysctls alone (nf_conntrack_max is not the node's own).
		conntrack:
		  maxPerCore: 0
		  min: 0
		  tcpEstablishedTimeout: 0s
		  tcpCloseWaitTimeout: 0s
		  udpTimeout: 0s
		  udpStreamTimeout: 0s
	EOF
}

write_join_config() {
	local n=$1 nd hash
	nd=$(node_dir "$n")
	hash=$(openssl x509 -pubkey -noout -in "$(node_dir 1)/overlay/etc/upper/kubernetes/pki/ca.crt" |
		openssl pkey -pubin -outform der 2>/dev/null | sha256sum | cut -d' ' -f1)
	cat >"$DIR/kubeadm/join-$(node_name "$n").yaml" <<-EOF
		apiVersion: kubeadm.k8s.io/v1beta4
		kind: JoinConfiguration
		discovery:
		  bootstrapToken:
		    apiServerEndpoint: $(node_ip 1):$API_PORT
		    token: "$(<"$DIR/kubeadm/token")"
		    caCertHashes: ["sha256:$hash"]
		nodeRegistration:
		  name: $(node_name "$n")
		  criSocket: unix://$nd/containerd/containerd.sock
		  imagePullPolicy: IfNotPresent
		  kubeletExtraArgs:
		  - name: node-ip
		    value: $(node_ip "$n")
		  ignorePreflightErrors: [$PREFLIGHT_IGNORE]
		patches:
		  directory: $nd/patches
		timeouts:
		  kubeletHealthCheck: 5m0s
		  kubernetesAPICall: 5m0s
		  tlsBootstrap: 10m0s
		  discovery: 10m0s
	EOF
}

# cni_up N CIDR: node N's pod network (bridge cni0 in the node, host-local addresses of the node's
# podCIDR, the pods' default route through the node, no masquerade), and the routes to it from the
# other nodes and the host (on ktc0: the host answers the pods that ask its upstream resolver).
cni_up() {
	local n=$1 cidr=$2 nd m gw
	nd=$(node_dir "$n")
	gw=${cidr%.*}.1
	cat >"$nd/cni/net.d/10-ktc.conflist.tmp" <<-EOF
		{
		  "cniVersion": "0.4.0",
		  "name": "ktc",
		  "plugins": [{
		    "type": "bridge",
		    "bridge": "cni0",
		    "isGateway": true,
		    "isDefaultGateway": true,
		    "ipMasq": false,
		    "hairpinMode": true,
		    "ipam": {
		      "type": "host-local",
		      "dataDir": "$nd/cni/ipam",
		      "ranges": [[{"subnet": "$cidr", "gateway": "$gw"}]]
		    }
		  }]
		}
	EOF
	mv "$nd/cni/net.d/10-ktc.conflist.tmp" "$nd/cni/net.d/10-ktc.conflist"
	for ((m = 1; m <= NODES; m++)); do
		((m == n)) && continue
		nsenter --net="$(netns "$m")" ip route replace "$cidr" via "$(node_ip "$n")" dev eth0
	done
	ip route replace "$cidr" via "$(node_ip "$n")" dev "$BRIDGE"
}

# ---------------------------------------------------------------- images

# push_images: every image kubeadm names (kubeadm config images list), from _out/cluster-images.
push_images() {
	local ref base layout got
	"$BIN/kubeadm" config images list --config "$DIR/kubeadm/init.yaml" >"$DIR/kubeadm/images" 2>"$DIR/log/kubeadm-images.log" ||
		die "kubeadm config images list: $(tail -n 5 "$DIR/log/kubeadm-images.log")"
	while read -r ref; do
		base=${ref##*/}
		layout=$IMAGES/${base%%:*}.oci
		[[ -s $layout/index.json ]] || die "kubeadm wants $ref: no $layout (make cluster-images)"
		[[ $(<"$layout/tag") == "${base#*:}" ]] ||
			die "kubeadm wants $ref, $layout is ${base%%:*}:$(<"$layout/tag") (make cluster-images)"
		got=$("$BIN/release" push -layout "$layout" -to "$ref" -ca "$DIR/registry/pki/ca.crt" </dev/null) ||
			die "pushing $layout to $ref failed"
		log "pushed $ref ($got)"
	done <"$DIR/kubeadm/images"
	# The client image the checks run in (make node-images; TestCluster), when built.
	if [[ -s $ROOT/_out/images/dnsq.oci/index.json ]]; then
		got=$("$BIN/release" push -layout "$ROOT/_out/images/dnsq.oci" -to "$REGISTRY/kubetree/dnsq:1" -ca "$DIR/registry/pki/ca.crt" </dev/null) ||
			die "pushing the dnsq image failed"
		log "pushed $REGISTRY/kubetree/dnsq:1 ($got)"
	fi
}

# ------------------------------------------------------------------ nodes

node_start() {
	local n=$1 name nd
	name=$(node_name "$n") nd=$(node_dir "$n")
	ns_up "$n"
	# A node started again in a cluster with NodeLocal DNSCache (cmd_nodelocal) gets its address.
	[[ ! -e $DIR/nodelocal ]] || nodelocal_on "$n"
	cgroups_up "$CGROUP_PARENT/$name"
	LAUNCH_IN=(nsenter --net="$(netns "$n")" --mount="$(mntns "$n")" --)
	if [[ -z $(pid_of "$name-containerd" containerd) ]]; then
		rm -rf "$nd/cni/ipam" && mkdir -p "$nd/cni/ipam"
		launch "$name-containerd" "$(command -v containerd)" --config "$nd/containerd/config.toml"
	fi
	if [[ -z $(pid_of "$name-kubelet" bash) ]]; then
		launch "$name-kubelet" /bin/bash "$nd/kubelet.sh"
	fi
	LAUNCH_IN=()
	wait_for 30 "$name: containerd is up" ctr -a "$nd/containerd/containerd.sock" version ||
		die "containerd of $name did not start: $(tail -n 20 "$DIR/log/$name-containerd.log")"
}

# kubeadm_run N LOGNAME ARGS...: kubeadm in node N; on failure, its output's end and the kubelet's.
kubeadm_run() {
	local n=$1 logf=$DIR/log/$2.log
	shift 2
	if ! in_node "$n" env PATH="$BIN:$PATH" "$BIN/kubeadm" "$@" -v=1 >"$logf" 2>&1; then
		log "kubeadm $1 failed; the end of its output ($logf):"
		tail -n 40 "$logf" | sed 's/^/  | /' >&2
		log "the end of the kubelet's log ($DIR/log/$(node_name "$n")-kubelet.log):"
		tail -n 25 "$DIR/log/$(node_name "$n")-kubelet.log" 2>/dev/null | sed 's/^/  | /' >&2
		die "kubeadm $1 failed on $(node_name "$n") (log: $logf)"
	fi
}

pod_cidr() { kubectl_ get node "$1" -o 'jsonpath={.spec.podCIDR}' 2>/dev/null; }
has_pod_cidr() { [[ -n $(pod_cidr "$1") ]]; }
coredns_pods() { [[ -n $(kubectl_ -n kube-system get pods -l k8s-app=kube-dns -o name 2>/dev/null) ]]; }
node_ready() {
	[[ $(kubectl_ get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}
nodes_ready() {
	local n
	for ((n = 1; n <= NODES; n++)); do node_ready "$(node_name "$n")" || return 1; done
}

# ------------------------------------------------------------------ verbs

cmd_up() {
	T0=$SECONDS
	step "check the binaries and images"
	local b
	for b in kubeadm kubelet kubectl registry release coredns-kubeadm; do
		[[ -x $BIN/$b ]] || die "missing $BIN/$b (make cluster builds it)"
	done
	for b in containerd runc ctr nsenter unshare openssl curl "$CNI_BIN/bridge" "$CNI_BIN/host-local" "$CNI_BIN/loopback"; do
		command -v "$b" >/dev/null || die "$b is missing: make node-deps"
	done
	[[ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]] || die "br_netfilter is not loaded (modprobe br_netfilter)"
	((NODES >= 1 && NODES <= 9)) || die "KUBETREE_CLUSTER_NODES=$NODES: 1 to 9"
	K8S_VERSION=$("$BIN/kubeadm" version -o short)
	mkdir -p "$DIR"/{log,run,host,kubeadm}
	echo "$NODES" >"$DIR/nodes.count"
	save_host_state

	step "host bridge $BRIDGE, registry and upstream on $HOST_IP"
	bridge_up
	if [[ ! -s $DIR/registry/pki/ca.crt ]]; then
		mkdir -p "$DIR/registry/pki"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
			-subj "/CN=kubetree-kubeadm-registry-ca" -keyout "$DIR/registry/pki/ca.key" \
			-out "$DIR/registry/pki/ca.crt" 2>"$DIR/log/openssl.log" || die "making the registry's CA failed"
	fi
	registry_up "$DIR/registry/pki" "$DIR/registry/pki/ca" "$HOST_IP"
	upstream_config "$DIR/upstream" "$HOST_IP"
	if [[ -z $(pid_of upstream coredns-kubeadm) ]]; then
		launch upstream "$BIN/coredns-kubeadm" -conf "$DIR/upstream/Corefile"
	fi

	step "kubeadm's configuration and images"
	write_kubeadm_configs
	push_images

	local n name
	for ((n = 1; n <= NODES; n++)); do
		step "node $(node_name "$n"): namespaces, containerd, kubelet"
		write_node_configs "$n"
		node_start "$n"
	done

	if [[ ! -s $(node_dir 1)/overlay/etc/upper/kubernetes/admin.conf ]]; then
		step "kubeadm init on $(node_name 1)"
		kubeadm_run 1 kubeadm-init init --config "$DIR/kubeadm/init.yaml"
	fi
	cp "$(node_dir 1)/overlay/etc/upper/kubernetes/admin.conf" "$DIR/kubeconfig"
	for ((n = 2; n <= NODES; n++)); do
		name=$(node_name "$n")
		[[ -s $(node_dir "$n")/overlay/etc/upper/kubernetes/kubelet.conf ]] && continue
		step "kubeadm join on $name"
		write_join_config "$n"
		kubeadm_run "$n" "kubeadm-join-$name" join --config "$DIR/kubeadm/join-$name.yaml"
	done

	step "pod network: each node's podCIDR, routes between the nodes"
	local cidr
	for ((n = 1; n <= NODES; n++)); do
		name=$(node_name "$n")
		wait_for 60 "$name has a podCIDR" has_pod_cidr "$name" || true
		cidr=$(pod_cidr "$name")
		[[ -n $cidr ]] || die "node $name has no podCIDR after 60 s (kube-controller-manager's allocate-node-cidrs)"
		cni_up "$n" "$cidr"
		log "$name: pods $cidr"
	done

	step "every node Ready"
	wait_for 180 "$NODES nodes Ready" nodes_ready || {
		kubectl_ get nodes -o wide >&2 || true
		for ((n = 1; n <= NODES; n++)); do
			node_ready "$(node_name "$n")" && continue
			log "the end of $(node_name "$n")'s kubelet log:"
			tail -n 25 "$DIR/log/$(node_name "$n")-kubelet.log" | sed 's/^/  | /' >&2
		done
		die "not every node is Ready within 180 s"
	}
	step "every kube-system pod Ready (CoreDNS, kube-proxy, the control plane)"
	wait_for 30 "CoreDNS's pods exist" coredns_pods || true
	if ! kubectl_ -n kube-system wait --for=condition=Ready pods --all --timeout=180s >"$DIR/log/wait-pods.log" 2>&1; then
		cat "$DIR/log/wait-pods.log" >&2
		kubectl_ -n kube-system get pods -o wide >&2 || true
		die "kube-system pods not Ready within 180 s"
	fi
	log "kube-system: $(kubectl_ -n kube-system get pods --no-headers 2>/dev/null | wc -l) pods Ready"
	{
		printf 'KUBECONFIG=%q\n' "$DIR/kubeconfig"
		printf 'NODES=%q\nPROXY_MODE=%q\nK8S_VERSION=%q\nCLUSTER_DNS=%q\nSERVICE_CIDR=%q\nREGISTRY=%q\nIMAGE_REPOSITORY=%q\nUPSTREAM=%q\n' \
			"$NODES" "$PROXY_MODE" "$K8S_VERSION" "$CLUSTER_DNS" "$SERVICE_CIDR" "$REGISTRY" "$REPO" "$HOST_IP:53"
	} >"$DIR/env"
	STEP=
	log "cluster up in $((SECONDS - T0)) s: $NODES nodes, kubeadm $K8S_VERSION, kube-proxy $PROXY_MODE (env: $DIR/env)"
	kubectl_ get nodes -o wide >&2
	echo "KUBECONFIG=$DIR/kubeconfig"
}

# node_stop N: everything of node N: its containers, kubelet, containerd and their shims (every
# process in its namespaces or cgroups), its namespaces (their mounts go with them), its cgroups.
node_stop() {
	local n=$1 name nd sock pids id
	name=$(node_name "$n") nd=$(node_dir "$n")
	sock=$nd/containerd/containerd.sock
	# The supervisor first, so that it does not restart the kubelet (SIGKILL: bash would act on a
	# SIGTERM only once the kubelet it waits for has exited).
	pids=$({
		pid_of "$name-kubelet" bash
		for id in $(pids_by_arg "$nd/kubelet.sh"); do
			if [[ $(argv0 "$id") == */bash ]]; then echo "$id"; fi
		done
	} | sort -u)
	# shellcheck disable=SC2086
	if [[ -n $pids ]]; then kill -KILL $pids 2>/dev/null || true; fi
	rm -f "$DIR/run/$name-kubelet.pid"
	if [[ -n $(pid_of "$name-containerd" containerd) ]]; then
		for id in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr -a "$sock" -n k8s.io tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
	fi
	pids=$({
		ns_pids net "$(netns "$n")"
		ns_pids mnt "$(mntns "$n")"
		pids_by_arg "$sock"
	} | sort -u)
	if [[ -n $pids ]]; then
		# shellcheck disable=SC2086
		kill_wait $pids
		log "$name: stopped pids ${pids//$'\n'/ }"
	fi
	# containerd can start a shim while it is being stopped (one was left running after a
	# TestCluster): once containerd is gone, sweep its socket's shims again.
	pids=$(pids_by_arg "$sock")
	if [[ -n $pids ]]; then
		# shellcheck disable=SC2086
		kill_wait $pids
		log "$name: stopped late shims ${pids//$'\n'/ }"
	fi
	rm -f "$DIR/run/$name-containerd.pid"
	cgroups_kill "$CGROUP_PARENT/$name"
	umount "$(netns "$n")" 2>/dev/null || true
	umount "$(mntns "$n")" 2>/dev/null || true
	rm -f "$(netns "$n")" "$(mntns "$n")"
	if ip link show "ktcv$n" >/dev/null 2>&1; then ip link del "ktcv$n" || true; fi
}

cmd_down() {
	[[ -d $DIR ]] || {
		log "nothing to stop: $DIR does not exist"
		return 0
	}
	mkdir -p "$DIR/run"
	local n f max=0
	for f in "$DIR"/nodes/ktc-*; do
		[[ -d $f ]] || continue
		n=${f##*/ktc-}
		((n > max)) && max=$n
	done
	for ((n = 1; n <= max; n++)); do node_stop "$n"; done
	cgroups_down "$CGROUP_PARENT"
	stop_proc upstream coredns-kubeadm "$DIR/upstream/Corefile"
	stop_proc registry registry "$DIR/registry/config.yml"
	if mountpoint -q "$DIR/ns"; then umount "$DIR/ns" || umount -l "$DIR/ns"; fi
	local owner
	owner=$(link_owner "$BRIDGE")
	if [[ -n $owner && $owner != "$DIR" ]]; then
		log "bridge $BRIDGE belongs to the cluster in $owner: left to it"
	elif ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE" && log "deleted bridge $BRIDGE (and its routes)"
	fi
	[[ -n $owner && $owner != "$DIR" ]] || guard_down
	# The host tracked the bridged traffic (br_netfilter): its entries would only time out.
	if command -v conntrack >/dev/null; then
		for f in "$NODE_NET" "$POD_CIDR" "$SERVICE_CIDR"; do
			conntrack -D -s "$f" >/dev/null 2>&1 || true
			conntrack -D -d "$f" >/dev/null 2>&1 || true
		done
	fi
	restore_host_state
	# What the nodes wrote (their overlays' upper layers, containerd's content) is in DIR; the next up
	# starts from nothing.
	rm -rf "$DIR/nodes" "$DIR/kubeadm" "$DIR/kubeconfig" "$DIR/env" "$DIR/registry/data" "$DIR/nodelocal"
	log "down"
}

cmd_status() {
	local rc=0 n name p
	for p in upstream:coredns-kubeadm registry:registry; do
		if [[ -n $(pid_of "${p%%:*}" "${p#*:}") ]]; then echo "${p%%:*}: running"; else
			echo "${p%%:*}: stopped"
			rc=1
		fi
	done
	local max
	max=$(cat "$DIR/nodes.count" 2>/dev/null || echo 0)
	for ((n = 1; n <= max; n++)); do
		name=$(node_name "$n")
		for p in containerd:containerd kubelet:bash; do
			if [[ -n $(pid_of "$name-${p%%:*}" "${p#*:}") ]]; then echo "$name ${p%%:*}: running"; else
				echo "$name ${p%%:*}: stopped"
				rc=1
			fi
		done
	done
	[[ -s $DIR/kubeconfig ]] && kubectl_ get nodes 2>/dev/null
	return $rc
}

# ------------------------------------------------------------------- main

# cmd_kubeadm N ARGS...: kubeadm run in node N as an operator runs it there (kubeadm upgrade
# apply on the control plane, kubeadm upgrade node on the others); its output, and its status.
# An upgrade's preflight passes over the checks this machine cannot pass, as init and join do.
cmd_kubeadm() {
	local n=$1
	shift
	[[ $n =~ ^[1-9]$ ]] && ((n <= $(cat "$DIR/nodes.count" 2>/dev/null || echo 0))) || die "no node $n in $DIR"
	local machine=()
	[[ ${1:-} == upgrade && ${2:-} =~ ^(apply|node)$ ]] && machine=(--ignore-preflight-errors="$PREFLIGHT_IGNORE")
	in_node "$n" env PATH="$BIN:$PATH" "$BIN/kubeadm" "$@" "${machine[@]}"
}

# cmd_node VERB N: node N lost (node-stop) or back (node-start: its namespaces, containerd and
# kubelet anew, the pod network's routes to and from it, then Ready), for make rollouts' node-loss.
cmd_node() {
	local verb=$1 n=$2 m name
	[[ $n =~ ^[1-9]$ ]] && ((n <= $(cat "$DIR/nodes.count" 2>/dev/null || echo 0))) || die "no node $n in $DIR"
	NODES=$(cat "$DIR/nodes.count")
	name=$(node_name "$n")
	if [[ $verb == node-stop ]]; then
		node_stop "$n"
		return
	fi
	node_start "$n"
	# Its new network namespace has no route to the other nodes' pods: every node's routes anew.
	for ((m = 1; m <= NODES; m++)); do cni_up "$m" "$(pod_cidr "$(node_name "$m")")"; done
	wait_for 180 "$name Ready" node_ready "$name" || {
		tail -n 25 "$DIR/log/$name-kubelet.log" | sed 's/^/  | /' >&2
		die "$name is not Ready within 180 s of its start"
	}
}

# nodelocal_on N: NodeLocal DNSCache's address and rules in node N's network namespace
# (nodelocal_address, hack/lib/node.sh), which goes with the node.
nodelocal_on() {
	nsenter --net="$(netns "$1")" bash -c "$(declare -f nodelocal_address log die); nodelocal_address $LOCAL_DNS_IF $LOCAL_DNS $NODELOCAL_MARK"
}

# cmd_nodelocal: NodeLocal DNSCache's address on every node, and on each node started later
# (DIR/nodelocal says so).
cmd_nodelocal() {
	local n
	NODES=$(cat "$DIR/nodes.count" 2>/dev/null || echo 0)
	((NODES > 0)) || die "no cluster in $DIR"
	for ((n = 1; n <= NODES; n++)); do nodelocal_on "$n"; done
	touch "$DIR/nodelocal"
	log "NodeLocal DNSCache's address $LOCAL_DNS on $NODES nodes"
}

# Sourced (to try one step by hand): the functions only.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0
(($# >= 1)) || usage
VERB=$1
case $VERB in
kubeadm) (($# >= 4)) || usage ;;
node-stop | node-start) (($# == 3)) || usage ;;
*) (($# <= 2)) || usage ;;
esac
((EUID == 0)) || die "needs root (namespaces, a bridge, containerd, kubelet)"
mkdir -p "${2:-$ROOT/_out/cluster}"
DIR=$(cd "${2:-$ROOT/_out/cluster}" && pwd -P)
case $DIR in /etc/* | /usr/* | /var/* | /run/*) die "DIR must not be under /etc, /usr, /var or /run (the nodes' overlays): $DIR" ;; esac
((${#DIR} < 60)) || die "DIR path too long for containerd's socket: $DIR"
exec 9>"$DIR/.lock"
flock -w 300 9 || die "another kubeadm-cluster.sh holds $DIR/.lock"
T0=$SECONDS
STEP=
# The preflight checks this machine cannot pass: no systemd, cgroup v1, no kernel config to read.
PREFLIGHT_IGNORE=SystemVerification,Service-Kubelet,FileExisting-crictl

case $VERB in
up) cmd_up ;;
down) cmd_down ;;
nodelocal) cmd_nodelocal ;;
status) cmd_status ;;
kubeadm) cmd_kubeadm "${@:3}" ;;
node-stop | node-start) cmd_node "$VERB" "$3" ;;
*) usage ;;
esac
