#!/usr/bin/env bash
# hack/cluster.sh — a local Kubernetes control plane (etcd + kube-apiserver, no
# controller-manager, no scheduler, no kubelet) on 127.0.0.1, for `make run`
# and for end-to-end tests.
#
# Usage:
#   hack/cluster.sh start DIR            start etcd + kube-apiserver (state in DIR)
#   hack/cluster.sh stop DIR             stop kube-apiserver, then etcd
#   hack/cluster.sh stop-apiserver DIR   stop only kube-apiserver
#   hack/cluster.sh start-apiserver DIR  restart kube-apiserver, same port and flags
#   hack/cluster.sh status DIR           print what runs in DIR (exit 0 iff both run)
#
# After `start`, DIR holds:
#   kubeconfig      admin kubeconfig (CA data embedded, bearer token of user
#                   "admin" in group system:masters)
#   env             KEY=value lines, shell-sourceable (`set -a; . DIR/env; set +a`):
#                   KUBECONFIG, APISERVER_URL, APISERVER_PORT, APISERVER_CA_FILE,
#                   ADMIN_TOKEN, ETCD_URL, ETCD_PORT, KUBECACHEDIR
#   etcd/           etcd data;  etcd.log, etcd.pid
#   kube-apiserver.log, kube-apiserver.pid
#   pki/            CA, serving cert, admin client cert, service-account keys, tokens.csv
#   ports, etcd.args, kube-apiserver.args   what `start-apiserver` (and a
#                   re-`start`) reuse, so the API server comes back at the same address
#
# Environment:
#   KUBETREE_CP_BIN           directory holding etcd, kube-apiserver, kubectl
#                             (default: <repo>/bin, built with make if missing)
#   KUBETREE_APISERVER_ARGS   extra kube-apiserver flags (whitespace-separated),
#                             used when DIR is first started
#   KUBETREE_READY_TIMEOUT    seconds to wait for /readyz (default 90)
#   KUBETREE_SA_ADMISSION=1   keep the ServiceAccount admission plugin (hack/node.sh,
#                             which runs a controller-manager), when DIR is first started
#
# Everything listens on 127.0.0.1 only; nothing is written outside DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BIN=${KUBETREE_CP_BIN:-$ROOT/bin}
READY_TIMEOUT=${KUBETREE_READY_TIMEOUT:-90}
STOP_TIMEOUT=20          # seconds between SIGTERM and SIGKILL
SERVICE_CIDRS=10.96.0.0/16,fd00:10:96::/112
SA_ISSUER=https://kubernetes.default.svc.cluster.local

log() { echo "cluster.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# ---------------------------------------------------------------- binaries

ensure_binaries() {
	local missing=0 b
	for b in etcd kube-apiserver kubectl; do
		[[ -x $BIN/$b ]] || missing=1
	done
	if ((missing)); then
		[[ -z ${KUBETREE_CP_BIN:-} ]] || die "KUBETREE_CP_BIN=$BIN lacks etcd, kube-apiserver or kubectl"
		log "building the control plane (make control-plane); the first build takes several minutes"
		make -C "$ROOT" -f hack/control-plane.mk control-plane >&2 || die "building the control plane failed"
	fi
}

# --------------------------------------------------------------- processes

# pid_of NAME: the pid recorded in DIR/NAME.pid, if that process still runs
# the NAME binary (and is not a zombie); prints nothing otherwise.
pid_of() {
	local name=$1 f="$DIR/$1.pid" pid state
	[[ -s $f ]] || return 0
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	[[ -r /proc/$pid/cmdline ]] || return 0
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1 | grep -q "/$name\$" || return 0
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
	[[ $state != Z && -n $state ]] || return 0
	echo "$pid"
}

running() { [[ -n $(pid_of "$1") ]]; }

# strays NAME: processes not in the pid file that still run NAME for this DIR
# (found by an argument that names DIR exactly), e.g. after a lost pid file.
strays() {
	local name=$1 marker p
	case $name in
	etcd) marker="--data-dir=$DIR/etcd" ;;
	kube-apiserver) marker="--cert-dir=$DIR/pki" ;;
	esac
	for p in /proc/[0-9]*; do
		[[ -r $p/cmdline ]] || continue
		if tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -Fxq -- "$marker"; then
			tr '\0' '\n' <"$p/cmdline" 2>/dev/null | head -n1 | grep -q "/$name\$" && echo "${p#/proc/}"
		fi
	done
	return 0
}

gone() { # gone PID...: true when none of them is alive (zombies count as gone)
	local p state
	for p in "$@"; do
		state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
		[[ -z $state || $state == Z ]] || return 1
	done
}

# stop_proc NAME: SIGTERM, wait up to STOP_TIMEOUT, SIGKILL, wait until gone.
stop_proc() {
	local name=$1 pids i
	pids=$( { pid_of "$name"; strays "$name"; } | sort -u)
	if [[ -z $pids ]]; then
		rm -f "$DIR/$name.pid"
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
		log "$name (pid ${pids//$'\n'/ }) did not exit after SIGTERM in ${STOP_TIMEOUT}s; sending SIGKILL"
		kill -KILL $pids 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			gone $pids && break
			sleep 0.1
		done
		gone $pids || die "$name (pid ${pids//$'\n'/ }) is still alive after SIGKILL"
	fi
	rm -f "$DIR/$name.pid"
	log "stopped $name (pid ${pids//$'\n'/ })"
}

# launch NAME ARGSFILE: start BIN/NAME in its own session, detached from our
# stdio (so callers that capture our output are not held open), logging to
# DIR/NAME.log; records the pid.
launch() {
	local name=$1 argsfile=$2 pid
	local -a args
	mapfile -t args <"$argsfile"
	echo "===== $(date -u +%FT%TZ) cluster.sh: starting $name" >>"$DIR/$name.log"
	# 9>&-: the daemon must not inherit (and so keep holding) DIR/.lock.
	setsid "$BIN/$name" "${args[@]}" </dev/null >>"$DIR/$name.log" 2>&1 9>&- &
	pid=$!
	echo "$pid" >"$DIR/$name.pid"
	# Until the fork has exec'd (bash, then setsid, then NAME) pid_of would
	# not recognise it; wait for that (or for it to die).
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -n $(pid_of "$name") ]] && return 0
		gone "$pid" && return 0
		sleep 0.05
	done
}

log_tail() {
	local f
	for f in "$@"; do
		[[ -f $DIR/$f.log ]] || continue
		echo "----- last 40 lines of $DIR/$f.log" >&2
		tail -n 40 "$DIR/$f.log" >&2
	done
}

# ------------------------------------------------------------------- ports

# used_ports: every local TCP port in use on this machine (any state).
used_ports() {
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk 'NR > 0 && $2 ~ /:/ { split($2, a, ":"); print a[2] }' |
		while read -r hex; do echo $((16#$hex)); done | sort -un
}

# free_ports N: N distinct loopback ports, free now, in 20000-29999 (below the
# ephemeral range, so outgoing connections don't take them meanwhile).
free_ports() {
	local n=$1 used p out=()
	used=" $(used_ports | tr '\n' ' ') "
	while ((${#out[@]} < n)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 10000))
		[[ $used == *" $p "* || " ${out[*]} " == *" $p "* ]] && continue
		out+=("$p")
	done
	echo "${out[@]}"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --------------------------------------------------------------------- PKI

ensure_pki() {
	local pki=$DIR/pki
	mkdir -p "$pki"
	chmod 700 "$pki"
	[[ -s $pki/tokens.csv && -s $pki/apiserver.crt && -s $pki/sa.key && -s $pki/admin.crt ]] && return 0
	command -v openssl >/dev/null || die "openssl is needed to make the cluster's certificates (apt-get install openssl)"
	local newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
	(
		set -e
		cd "$pki"
		exec 2>openssl.log
		# Cluster CA: signs the serving cert and the admin client cert; also
		# the --client-ca-file, so client certs it signs authenticate.
		openssl req -x509 "${newkey[@]}" -keyout ca.key -out ca.crt -days 3650 \
			-subj "/CN=kubetree-local-ca" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
		cat >apiserver.ext <<-EOF
			basicConstraints=critical,CA:FALSE
			keyUsage=critical,digitalSignature,keyEncipherment
			extendedKeyUsage=serverAuth
			subjectAltName=IP:127.0.0.1,IP:::1,IP:10.96.0.1,IP:fd00:10:96::1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
		EOF
		openssl req -new "${newkey[@]}" -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver"
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -CAserial ca.srl \
			-days 3650 -extfile apiserver.ext -out apiserver.crt
		# Admin client cert (alternative to the token): O=system:masters.
		cat >admin.ext <<-EOF
			basicConstraints=critical,CA:FALSE
			keyUsage=critical,digitalSignature,keyEncipherment
			extendedKeyUsage=clientAuth
		EOF
		openssl req -new "${newkey[@]}" -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin"
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAserial ca.srl \
			-days 3650 -extfile admin.ext -out admin.crt
		# Service-account token signing key pair (RS256).
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key
		openssl pkey -in sa.key -pubout -out sa.pub
		# Static bearer token for the admin user: token,user,uid,"groups".
		tok=$(openssl rand -hex 24)
		echo "$tok" >admin.token
		echo "$tok,admin,admin,\"system:masters\"" >tokens.csv
		rm -f apiserver.csr admin.csr
		chmod 600 ./*.key admin.token tokens.csv
	) || {
		cat "$pki/openssl.log" >&2 || true
		die "making certificates in $pki failed"
	}
}

# ------------------------------------------------------------------ config

write_args() {
	local ec=$1 ep=$2 ap=$3
	cat >"$DIR/ports" <<-EOF
		ETCD_PORT=$ec
		ETCD_PEER_PORT=$ep
		APISERVER_PORT=$ap
	EOF
	# One argument per line. etcd's quota is 8 GiB, not its default 2 GiB: bench -fleet rewrites the
	# slices of 1M endpoints for minutes in each of its storms, and the database grows with every
	# revision until it is defragmented (the API server only compacts); at 2 GiB etcd refused every
	# write ("database space exceeded") in the third storm of a run.
	cat >"$DIR/etcd.args" <<-EOF
		--name=kubetree
		--data-dir=$DIR/etcd
		--listen-client-urls=http://127.0.0.1:$ec
		--advertise-client-urls=http://127.0.0.1:$ec
		--listen-peer-urls=http://127.0.0.1:$ep
		--initial-advertise-peer-urls=http://127.0.0.1:$ep
		--initial-cluster=kubetree=http://127.0.0.1:$ep
		--initial-cluster-state=new
		--initial-cluster-token=kubetree-$ec
		--unsafe-no-fsync=true
		--quota-backend-bytes=8589934592
		--log-level=warn
	EOF
	local pki=$DIR/pki
	cat >"$DIR/kube-apiserver.args" <<-EOF
		--etcd-servers=http://127.0.0.1:$ec
		--bind-address=127.0.0.1
		--advertise-address=127.0.0.1
		--secure-port=$ap
		--cert-dir=$pki
		--tls-cert-file=$pki/apiserver.crt
		--tls-private-key-file=$pki/apiserver.key
		--client-ca-file=$pki/ca.crt
		--token-auth-file=$pki/tokens.csv
		--authorization-mode=RBAC
		--service-cluster-ip-range=$SERVICE_CIDRS
		--endpoint-reconciler-type=none
		--service-account-issuer=$SA_ISSUER
		--service-account-key-file=$pki/sa.pub
		--service-account-signing-key-file=$pki/sa.key
		--profiling=false
	EOF
	# No token controller here: the ServiceAccount admission plugin would refuse bare Pods.
	# A node (hack/node.sh) runs kube-controller-manager and needs the plugin's token volumes.
	if [[ ${KUBETREE_SA_ADMISSION:-} != 1 ]]; then
		echo "--disable-admission-plugins=ServiceAccount" >>"$DIR/kube-apiserver.args"
	fi
	local extra
	for extra in ${KUBETREE_APISERVER_ARGS:-}; do
		echo "$extra" >>"$DIR/kube-apiserver.args"
	done
}

load_ports() {
	[[ -s $DIR/ports ]] || die "$DIR has no recorded ports; run '$0 start $DIR' first"
	ETCD_PORT=$(sed -n 's/^ETCD_PORT=//p' "$DIR/ports")
	APISERVER_PORT=$(sed -n 's/^APISERVER_PORT=//p' "$DIR/ports")
}

write_client_config() {
	local ca token url
	ca=$(base64 -w0 <"$DIR/pki/ca.crt")
	token=$(<"$DIR/pki/admin.token")
	url=https://127.0.0.1:$APISERVER_PORT
	rm -f "$DIR/kubeconfig.tmp" "$DIR/env.tmp"
	: >"$DIR/kubeconfig.tmp"
	chmod 600 "$DIR/kubeconfig.tmp"
	cat >>"$DIR/kubeconfig.tmp" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: kubetree
		  cluster:
		    server: $url
		    certificate-authority-data: $ca
		users:
		- name: admin
		  user:
		    token: $token
		contexts:
		- name: kubetree
		  context:
		    cluster: kubetree
		    user: admin
		current-context: kubetree
	EOF
	mv -f "$DIR/kubeconfig.tmp" "$DIR/kubeconfig"
	{
		printf 'KUBECONFIG=%q\n' "$DIR/kubeconfig"
		printf 'APISERVER_URL=%q\n' "$url"
		printf 'APISERVER_PORT=%q\n' "$APISERVER_PORT"
		printf 'APISERVER_CA_FILE=%q\n' "$DIR/pki/ca.crt"
		printf 'ADMIN_TOKEN=%q\n' "$token"
		printf 'ETCD_URL=%q\n' "http://127.0.0.1:$ETCD_PORT"
		printf 'ETCD_PORT=%q\n' "$ETCD_PORT"
		printf 'KUBECACHEDIR=%q\n' "$DIR/.kube/cache"
	} >"$DIR/env.tmp"
	mv -f "$DIR/env.tmp" "$DIR/env"
}

# ------------------------------------------------------------------ health

readyz() {
	local url=https://127.0.0.1:$APISERVER_PORT/readyz
	if command -v curl >/dev/null; then
		curl -fsS --max-time 5 --cacert "$DIR/pki/ca.crt" \
			-H "Authorization: Bearer $(<"$DIR/pki/admin.token")" "$url" >/dev/null 2>&1
	else
		"$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" --cache-dir "$DIR/.kube/cache" \
			--request-timeout=5s get --raw /readyz >/dev/null 2>&1
	fi
}

# wait_etcd SECONDS: true once etcd answers on its client port; false if it
# dies or the time runs out.
wait_etcd() {
	local deadline=$((SECONDS + $1))
	while ((SECONDS < deadline)); do
		running etcd || return 1
		if port_open "$ETCD_PORT"; then
			if ! command -v curl >/dev/null || curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1; then
				return 0
			fi
		fi
		sleep 0.2
	done
	return 1
}

# wait_apiserver: true once /readyz answers ok; sets WHY when it is not.
WHY=
wait_apiserver() {
	local deadline=$((SECONDS + READY_TIMEOUT))
	while ((SECONDS < deadline)); do
		running kube-apiserver || {
			WHY="kube-apiserver exited"
			return 1
		}
		readyz && return 0
		sleep 0.5
	done
	WHY="kube-apiserver did not become ready within ${READY_TIMEOUT}s"
	return 1
}

bind_conflict() { # bind_conflict NAME: the last start of NAME failed to bind
	awk '/===== .* cluster.sh: starting/ { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' \
		"$DIR/$1.log" 2>/dev/null | grep -qi 'address already in use'
}

# ------------------------------------------------------------------ verbs

start_etcd() {
	launch etcd "$DIR/etcd.args"
	wait_etcd 30
}

start_apiserver() {
	launch kube-apiserver "$DIR/kube-apiserver.args"
	wait_apiserver
}

cmd_start() {
	mkdir -p "$DIR"
	ensure_binaries
	if running etcd && running kube-apiserver; then
		load_ports
		write_client_config
		log "already running in $DIR (apiserver https://127.0.0.1:$APISERVER_PORT)"
		return 0
	fi
	ensure_pki

	local keep_port=
	if [[ -s $DIR/ports && -s $DIR/etcd.args && -s $DIR/kube-apiserver.args ]]; then
		# Restart in an existing DIR: same ports, same flags, same data.
		keep_port=1
		load_ports
		if ! wait_etcd 10; then # not running, or not healthy
			stop_proc etcd          # that one and strays, if any
			start_etcd || {
				log_tail etcd
				stop_proc etcd
				die "etcd did not start"
			}
		fi
	else
		local attempt
		for attempt in 1 2 3 4 5; do
			read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT <<<"$(free_ports 3)"
			write_args "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT"
			rm -rf "$DIR/etcd"
			if start_etcd; then
				break
			fi
			stop_proc etcd
			if bind_conflict etcd && ((attempt < 5)); then
				log "etcd port taken meanwhile, retrying with other ports"
				continue
			fi
			log_tail etcd
			die "etcd did not start"
		done
	fi
	write_client_config

	if running kube-apiserver; then # etcd was down, the apiserver was not
		if wait_apiserver; then
			log "kube-apiserver ready at https://127.0.0.1:$APISERVER_PORT (etcd http://127.0.0.1:$ETCD_PORT)"
			return 0
		fi
	fi
	stop_proc kube-apiserver # a hung one, or strays without a pid file
	local attempt
	for attempt in 1 2 3; do
		if start_apiserver; then
			log "kube-apiserver ready at https://127.0.0.1:$APISERVER_PORT (etcd http://127.0.0.1:$ETCD_PORT)"
			log "kubeconfig: $DIR/kubeconfig   env: $DIR/env"
			return 0
		fi
		stop_proc kube-apiserver
		if bind_conflict kube-apiserver && ((attempt < 3)) && [[ -z $keep_port ]]; then
			# Another process took the port between picking and binding: new port.
			log "apiserver port $APISERVER_PORT taken meanwhile, retrying with another port"
			APISERVER_PORT=$(free_ports 1)
			sed -i "s/^APISERVER_PORT=.*/APISERVER_PORT=$APISERVER_PORT/" "$DIR/ports"
			sed -i "s/^--secure-port=.*/--secure-port=$APISERVER_PORT/" "$DIR/kube-apiserver.args"
			write_client_config
			continue
		fi
		break
	done
	log_tail kube-apiserver etcd
	stop_proc kube-apiserver
	stop_proc etcd
	die "$WHY; stopped everything"
}

cmd_stop() {
	[[ -d $DIR ]] || {
		log "nothing to stop: $DIR does not exist"
		return 0
	}
	stop_proc kube-apiserver
	stop_proc etcd
}

cmd_stop_apiserver() {
	[[ -d $DIR ]] || die "$DIR does not exist"
	stop_proc kube-apiserver
}

cmd_start_apiserver() {
	[[ -s $DIR/kube-apiserver.args ]] || die "$DIR has no recorded apiserver flags; run '$0 start $DIR' first"
	load_ports
	ensure_binaries
	if running kube-apiserver; then
		log "kube-apiserver already running in $DIR (https://127.0.0.1:$APISERVER_PORT)"
		return 0
	fi
	running etcd || log "warning: etcd is not running in $DIR; kube-apiserver will not become ready"
	stop_proc kube-apiserver # strays, if any
	local attempt
	for attempt in 1 2 3; do
		if start_apiserver; then
			write_client_config
			log "kube-apiserver ready again at https://127.0.0.1:$APISERVER_PORT"
			return 0
		fi
		stop_proc kube-apiserver
		# The old listener may linger for a moment; the address must stay the same.
		bind_conflict kube-apiserver && ((attempt < 3)) && {
			sleep 1
			continue
		}
		break
	done
	log_tail kube-apiserver
	die "$WHY (https://127.0.0.1:$APISERVER_PORT)"
}

cmd_status() {
	[[ -d $DIR ]] || {
		echo "$DIR: not started"
		return 1
	}
	local rc=0 n p
	for n in etcd kube-apiserver; do
		p=$(pid_of "$n")
		if [[ -n $p ]]; then echo "$n: running (pid $p)"; else
			echo "$n: stopped"
			rc=1
		fi
	done
	[[ -s $DIR/ports ]] && sed 's/^/  /' "$DIR/ports"
	return $rc
}

# ------------------------------------------------------------------- main

(($# == 2)) || usage
VERB=$1
[[ -n $2 ]] || usage
if [[ $VERB == start ]]; then mkdir -p "$2"; fi
if [[ -d $2 ]]; then DIR=$(cd "$2" && pwd -P); else DIR=$2; fi

# Serialize verbs on the same DIR (parallel tests use separate DIRs).
if [[ -d $DIR ]] && command -v flock >/dev/null; then
	exec 9>"$DIR/.lock"
	flock -w 300 9 || die "another cluster.sh holds $DIR/.lock"
fi

case $VERB in
start) cmd_start ;;
stop) cmd_stop ;;
stop-apiserver) cmd_stop_apiserver ;;
start-apiserver) cmd_start_apiserver ;;
status) cmd_status ;;
*) usage ;;
esac
