# hack/lib/node.sh — shell functions that hack/node.sh (the hand-built node) and
# hack/kubeadm-cluster.sh (the kubeadm cluster) share: daemons (launch, find, stop), waiting,
# cgroup roots, the node's registry (CNCF Distribution with TLS) and the stand-in upstream resolver.
# Sourced, never run. The caller defines log and die, and DIR (its daemons log to DIR/log/NAME.log
# and are recorded in DIR/run/NAME.pid); T0 is the SECONDS its step started at (wait_for's figure).
# LAUNCH_IN, an array, is a command launch runs the daemon through (e.g. nsenter into a node's
# namespaces); it must exec the daemon (same pid).

STOP_TIMEOUT=${STOP_TIMEOUT:-20}
LAUNCH_IN=()

# --------------------------------------------------------------- processes

# argv0 PID: the program a process runs (first word of its command line).
argv0() {
	local a
	a=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline") || return 0
	echo "${a%%$'\n'*}"
}

# Each daemon is started detached (setsid), logs to DIR/log/NAME.log, and is recorded in
# DIR/run/NAME.pid; pid_of NAME BINARY checks that the recorded process still runs BINARY.
pid_of() {
	local f=$DIR/run/$1.pid pid state
	[[ -s $f ]] || return 0
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 0
	[[ $(argv0 "$pid") == */"$2" || $(argv0 "$pid") == "$2" ]] || return 0
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
	[[ -n $state && $state != Z ]] || return 0
	echo "$pid"
}

gone() {
	local p state
	for p in "$@"; do
		state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
		[[ -z $state || $state == Z ]] || return 1
	done
}

# launch NAME BINARY ARGS...: start BINARY detached as daemon NAME (through LAUNCH_IN, if set).
launch() {
	local name=$1 bin=$2 pid i
	shift 2
	mkdir -p "$DIR/log" "$DIR/run"
	echo "===== $(date -u +%FT%TZ) starting $name" >>"$DIR/log/$name.log"
	setsid "${LAUNCH_IN[@]}" "$bin" "$@" </dev/null >>"$DIR/log/$name.log" 2>&1 9>&- &
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
# One grep over every command line: a fork per process is minutes on a loaded machine.
pids_by_arg() {
	local p
	# The greps themselves hold STRING too; they have exited when the loop looks.
	for p in $(grep -laF -- "$1" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
		[[ $p != "$$" && -d /proc/$p ]] && echo "$p"
	done
	return 0
}

# kill_wait SIGNAL-LESS PIDS...: SIGTERM, SIGKILL after STOP_TIMEOUT, wait until gone.
kill_wait() {
	local i
	kill -TERM "$@" 2>/dev/null || true
	for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
		gone "$@" && return 0
		sleep 0.1
	done
	log "pids $* did not exit after SIGTERM in ${STOP_TIMEOUT}s; SIGKILL"
	kill -KILL "$@" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		gone "$@" && return 0
		sleep 0.1
	done
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
	kill_wait $pids
	rm -f "$DIR/run/$name.pid"
	log "stopped $name (pid ${pids//$'\n'/ })"
}

# ---------------------------------------------------------------- waiting

wait_for() { # wait_for SECONDS WHAT COMMAND...
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
	log "$what ($((SECONDS - T0)) s)"
}

# ------------------------------------------------------------------ links

# link_owner LINK: the DIR of the node that made LINK (kept in the link's alias), if any.
link_owner() { ip -o link show "$1" 2>/dev/null | sed -n 's/.* alias \(.*\)$/\1/p' || true; }

# ---------------------------------------------------------------- cgroups

# cgroups_up ROOT: kubelet wants its cgroup root (ROOT, e.g. kubetree or ktc/node-1) to exist in
# every hierarchy (cgroup v1 here); a cpuset cgroup needs cpus and mems before anything can join
# it, at every level.
cgroups_up() {
	local h p part
	for h in /sys/fs/cgroup/*/; do
		[[ -f $h/cgroup.procs ]] || continue
		p=${h%/}
		for part in ${1//\// }; do
			mkdir -p "$p/$part"
			if [[ -f $p/cpuset.cpus ]]; then
				[[ -n $(<"$p/$part/cpuset.cpus") ]] || cat "$p/cpuset.cpus" >"$p/$part/cpuset.cpus"
				[[ -n $(<"$p/$part/cpuset.mems") ]] || cat "$p/cpuset.mems" >"$p/$part/cpuset.mems"
			fi
			p=$p/$part
		done
	done
}

# cgroups_kill ROOT: SIGKILL every process in ROOT's cgroups (container processes whose shim is gone).
cgroups_kill() {
	local cg
	for cg in /sys/fs/cgroup/*/"$1"; do
		[[ -d $cg ]] || continue
		find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -KILL 2>/dev/null || true
	done
}

# cgroups_down ROOT: the cgroups under ROOT, deepest first, in every hierarchy.
cgroups_down() {
	local cg
	for cg in /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1"; do
		[[ -d $cg ]] || continue
		find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[[ -d $cg ]] && log "warning: cgroup $cg left (busy)"
	done
	return 0
}

# --------------------------------------------------------------- registry

# registry_up PKI CA IP: the node's registry (CNCF Distribution, BIN/registry) on IP:5000 only,
# serving TLS with a certificate for IP that CA (CA.crt, CA.key, CA.srl) signs, storage in
# DIR/registry/data; daemon "registry". Containerd trusts it through certs.d (registry_hosts).
registry_up() {
	local pki=$1 ca=$2 ip=$3
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
				subjectAltName=IP:$ip
			EOF
			openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout registry.key \
				-out registry.csr -subj "/CN=kubetree-node-registry"
			openssl x509 -req -in registry.csr -CA "$ca.crt" -CAkey "$ca.key" -CAserial "$ca.srl" \
				-CAcreateserial -days 3650 -extfile registry.ext -out registry.crt
			rm -f registry.csr
			chmod 600 registry.key
		) || {
			cat "$pki/openssl.log" >&2 || true
			die "making the registry's certificate in $pki failed"
		}
	fi
	mkdir -p "$DIR/registry/data"
	cat >"$DIR/registry/config.yml" <<-EOF
		version: 0.1
		log:
		  level: info
		  formatter: text
		storage:
		  filesystem:
		    rootdirectory: $DIR/registry/data
		http:
		  addr: $ip:5000
		  tls:
		    certificate: $pki/registry.crt
		    key: $pki/registry.key
	EOF
	if [[ -z $(pid_of registry registry) ]]; then
		# No traces exported: there is nowhere to send them, and the exporter would keep trying.
		OTEL_TRACES_EXPORTER=none launch registry "$BIN/registry" serve "$DIR/registry/config.yml"
	fi
	wait_for 30 "the registry answers on $ip:5000" curl -fsS -o /dev/null --cacert "$ca.crt" "https://$ip:5000/v2/" ||
		die "the registry did not start: $DIR/log/registry.log"
}

# registry_hosts CERTS_D REGISTRY CA_CRT: containerd's certs.d entry that trusts REGISTRY's CA
# (pull and resolve only).
registry_hosts() {
	mkdir -p "$1/$2"
	cat >"$1/$2/hosts.toml" <<-EOF
		server = "https://$2"
		[host."https://$2"]
		  capabilities = ["pull", "resolve"]
		  ca = "$3"
	EOF
}

# ---------------------------------------------------- NodeLocal DNSCache

# nodelocal_address IF ADDR MARK: what node-cache does for itself when it starts (it runs with
# NET_ADMIN; our cache is plain CoreDNS without it), in the caller's network namespace: ADDR on an
# interface IF of its own, and node-cache's rules for that address, each with comment MARK: NOTRACK
# in the raw table, so that queries to the cache and its answers skip connection tracking (the
# point of the design: no conntrack entries, no DNAT races), with the filter ACCEPTs that let the
# untracked packets in and out.
nodelocal_address() {
	local ifname=$1 addr=$2 p
	local mark=(-m comment --comment "$3")
	if ! ip link show "$ifname" >/dev/null 2>&1; then
		# A dummy device, as node-cache makes. This machine's kernel has no dummy driver (and no
		# modules): an ifb device holds an address the same way (nothing is redirected to it).
		ip link add "$ifname" type dummy 2>/dev/null || ip link add "$ifname" type ifb ||
			die "cannot make interface $ifname (neither a dummy nor an ifb device)"
	fi
	ip addr replace "$addr/32" dev "$ifname"
	ip link set "$ifname" up
	for p in tcp udp; do
		iptables -w -t raw -I PREROUTING -p "$p" -d "$addr" --dport 53 "${mark[@]}" -j NOTRACK
		iptables -w -t filter -I INPUT -p "$p" -d "$addr" --dport 53 "${mark[@]}" -j ACCEPT
		iptables -w -t raw -I OUTPUT -p "$p" -s "$addr" --sport 53 "${mark[@]}" -j NOTRACK
		iptables -w -t filter -I OUTPUT -p "$p" -s "$addr" --sport 53 "${mark[@]}" -j ACCEPT
		# Queries made on the node itself (host-network pods).
		iptables -w -t raw -I OUTPUT -p "$p" -d "$addr" --dport 53 "${mark[@]}" -j NOTRACK
	done
	# The liveness probe of the cache's health endpoint.
	iptables -w -t raw -I OUTPUT -p tcp -d "$addr" --dport 8080 "${mark[@]}" -j NOTRACK
	iptables -w -t raw -I OUTPUT -p tcp -s "$addr" --sport 8080 "${mark[@]}" -j NOTRACK
}

# --------------------------------------------------------------- upstream

# upstream_config UPDIR IP: the stand-in upstream's Corefile (UPDIR/Corefile) and zone, served
# on IP:53 by bin/coredns: the only resolver outside the cluster that pods ever reach.
upstream_config() {
	local up=$1 ip=$2
	mkdir -p "$up"
	cat >"$up/example.test.zone" <<-EOF
		\$ORIGIN example.test.
		@   60 IN SOA ns.example.test. hostmaster.example.test. 1 7200 1800 86400 30
		@   60 IN NS  ns.example.test.
		ns  60 IN A   198.51.100.2
		www 60 IN A   198.51.100.7
		api 60 IN A   198.51.100.8
	EOF
	cat >"$up/Corefile" <<-EOF
		# Names outside the cluster, as the world would answer them (TEST-NET-2, never contacted).
		example.test:53 {
		    bind $ip
		    errors
		    file $up/example.test.zone
		}
		# Every other name: NXDOMAIN. Nothing is asked beyond this machine.
		.:53 {
		    bind $ip
		    errors
		    template ANY ANY {
		        rcode NXDOMAIN
		    }
		}
	EOF
}
