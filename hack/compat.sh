#!/usr/bin/env bash
# hack/compat.sh — the compatibility matrix (`make compat`): the e2e suite against kube-apiserver of
# each Kubernetes minor in the window, the plugin.cfg build against each CoreDNS release, and the
# table of what was measured written into docs/compatibility.md.
#
# Usage:
#   hack/compat.sh apiserver VERSION    build kube-apiserver VERSION once into _out/compat/cp/VERSION/
#   hack/compat.sh e2e VERSION          run the e2e suite against it; _out/compat/VERSION/ holds the logs
#   hack/compat.sh coredns VERSION      TestPluginCfgBuild against CoreDNS VERSION; _out/compat/coredns-VERSION.log
#   hack/compat.sh table                write the table of every result under _out/compat/ into docs/compatibility.md
#   hack/compat.sh oldest               print the oldest of VERSIONS
#   hack/compat.sh all                  all of the above for VERSIONS and COREDNS_VERSIONS, then table
#
# Environment:
#   VERSIONS          kube-apiserver versions (default: the newest patch of v1.34 to v1.37 the Go module proxy
#                     serves, and v1.34.4 without streamed lists); VERSION/GATES adds --feature-gates=GATES
#   COREDNS_VERSIONS  CoreDNS releases for the plugin.cfg build (default: the oldest and newest v1.14 the
#                     module proxy lists, and v1.15.0, the one cmd/coredns requires)
#
# An older kube-apiserver builds as the pinned one does (hack/control-plane.mk), from a module of its
# own under _out/compat/mod/VERSION that requires k8s.io/kubernetes VERSION and replaces each of that
# version's staging modules with its v0.MINOR.PATCH. etcd and kubectl stay the pinned ones (bin/).
# A version that fails to build or to pass says so in its result; the matrix goes on.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
OUT=$ROOT/_out/compat
VERSIONS=${VERSIONS:-v1.34.4 v1.35.4 v1.36.3 v1.37.2 v1.34.4/WatchList=false}
COREDNS_VERSIONS=${COREDNS_VERSIONS:-v1.14.3 v1.14.7 v1.15.0}
GO=${GO:-go}
export GOFLAGS=${GOFLAGS:--buildvcs=false} GOWORK=off

log() { echo "compat.sh: $*" >&2; }

# The pinned version (hack/tools/go.mod) is bin/kube-apiserver itself: make control-plane builds it.
PINNED=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' hack/tools/go.mod)

# ------------------------------------------------------------ kube-apiserver

# apiserver VERSION: _out/compat/cp/VERSION/ with kube-apiserver VERSION and the pinned etcd and
# kubectl (what KUBETREE_CP_BIN names); built once, kept while the binary is there.
apiserver() {
	local v=$1 cp=$OUT/cp/$1 mod=$OUT/mod/$1
	mkdir -p "$cp"
	if [[ $v == "$PINNED" ]]; then
		ln -sf "$ROOT/bin/kube-apiserver" "$cp/kube-apiserver"
	elif [[ ! -x $cp/kube-apiserver ]]; then
		build_apiserver "$v" || return 1
	fi
	make -s control-plane >&2 || return 1
	ln -sf "$ROOT/bin/etcd" "$cp/etcd"
	ln -sf "$ROOT/bin/kubectl" "$cp/kubectl"
}

build_apiserver() {
	local v=$1 cp=$OUT/cp/$1 mod=$OUT/mod/$1
	log "building kube-apiserver $v (a few minutes)"
	local src
	src=$($GO mod download -json "k8s.io/kubernetes@$v" | awk -F'"' '$2 == "Dir" { print $4 }') || return 1
	[[ -n $src ]] || { log "k8s.io/kubernetes@$v: not served by the module proxy"; return 1; }
	rm -rf "$mod" && mkdir -p "$mod" "$cp"
	# Kubernetes' own go.mod replaces its staging modules with ./staging/src/k8s.io/NAME: here each
	# is the published module of the same release, v0.MINOR.PATCH.
	local staging=v0.${v#v1.}
	{
		echo "module compat/kube-apiserver"
		echo
		awk '$1 == "go" { print; exit }' "$src/go.mod"
		echo
		echo "require k8s.io/kubernetes $v"
		echo
		awk -v s="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// { print "replace " $1 " => " $1 " " s }' "$src/go.mod"
	} >"$mod/go.mod"
	local major=1 minor
	minor=$(cut -d. -f2 <<<"$v")
	local x="" p
	for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		x+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	(cd "$mod" && GOFLAGS="$GOFLAGS -mod=mod" $GO build -trimpath -ldflags="-s -w$x" \
		-o "$cp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver) >"$OUT/cp/$v.build.log" 2>&1 || {
		log "kube-apiserver $v did not build: $OUT/cp/$v.build.log"
		return 1
	}
}

# ------------------------------------------------------------------ e2e suite

# The audit policy that shows how kubetree lists: one line per list and watch request, with its
# query (sendInitialEvents=true is a streamed list) and its response code.
AUDIT_POLICY='apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
- level: None'

# e2e VERSION: make e2e with KUBETREE_CP_BIN at VERSION's control plane and the API server auditing
# its lists and watches; the suite's log, the audit log and the result go to _out/compat/VERSION/.
# An entry of VERSIONS is a version, or VERSION/GATES: that version with --feature-gates=GATES
# (v1.34.4/WatchList=false: without streamed lists, as v1.33 by default). rundir names its logs' directory.
rundir() { echo "$OUT/${1//\//-}"; }
label() { [[ $1 == */* ]] && echo "${1%%/*} with --feature-gates=${1#*/}" || echo "$1"; }

e2e() {
	local v=${1%%/*} gates="" dir
	[[ $1 == */* ]] && gates="--feature-gates=${1#*/}"
	dir=$(rundir "$1")
	rm -rf "$dir" && mkdir -p "$dir"
	if ! apiserver "$v" 2>"$dir/build.err"; then
		echo "build failed: $(tail -n 3 "$OUT/cp/$v.build.log" 2>/dev/null | tr '\n' ' ' || cat "$dir/build.err")" >"$dir/result"
		return 1
	fi
	# TestBuildInfo wants the commit checked out; make rebuilds on a change of source only.
	local rev
	rev=$(hack/version.sh | awk '{ print $2 }')
	grep -qaF "${rev%-dirty}" bin/coredns-race 2>/dev/null || rm -f bin/coredns-race
	printf '%s\n' "$AUDIT_POLICY" >"$dir/audit-policy.yaml"
	hack/version.sh | awk '{ print $2 }' >"$dir/revision"
	local start=$SECONDS status
	KUBETREE_CP_BIN=$OUT/cp/$v \
		KUBETREE_APISERVER_ARGS="--audit-policy-file=$dir/audit-policy.yaml --audit-log-path=$dir/audit.log --audit-log-format=json $gates" \
		make e2e >"$dir/make.log" 2>&1
	status=$?
	cp _out/e2e.log "$dir/e2e.log" 2>/dev/null
	echo "$((SECONDS - start))" >"$dir/seconds"
	"$OUT/cp/$v/kube-apiserver" --version >"$dir/version" 2>&1
	if ((status == 0)); then echo pass >"$dir/result"; else echo fail >"$dir/result"; fi
	return $status
}

# streamed DIR: how kubetree (user agent "kubetree") listed in that run: "yes" when the API server
# answered its watches with sendInitialEvents=true (streamed lists) with 200, else "no" and what
# kubetree did instead. Requests are counted once each (by audit ID) over both audited stages.
streamed() {
	local audit=$1/audit.log
	[[ -s $audit ]] || { echo "not measured (no audit log)"; return; }
	awk '
		function field(name) {
			if (!match($0, "\"" name "\":\"[^\"]*\"")) return ""
			return substr($0, RSTART + length(name) + 4, RLENGTH - length(name) - 5)
		}
		function code(   rest) {
			rest = substr($0, index($0, "\"responseStatus\":"))
			if (!match(rest, /"code":[0-9]+/)) return ""
			return substr(rest, RSTART + 7, RLENGTH - 7)
		}
		field("userAgent") == "kubetree" {
			id = field("auditID"); verb = field("verb"); c = code()
			if (verb == "list") lists[id] = 1
			else if (verb == "watch" && field("requestURI") ~ /sendInitialEvents=true/) {
				if (c == 200) served[id] = 1
				else if (c != "") refused[id] = c
			}
		}
		END {
			for (id in lists) nl++
			for (id in served) ns++
			for (id in refused) if (!(id in served)) { nr++; why = refused[id] }
			if (ns > 0) printf "yes: %d streamed lists served, %d LISTs\n", ns, nl
			else if (nr > 0) printf "no: %d streamed lists refused (HTTP %s), %d LISTs instead\n", nr, why, nl
			else printf "no: %d LISTs, no streamed list asked for\n", nl
		}' "$audit"
}

# differs DIR: the suite's failed and skipped tests, each with its first reason line.
differs() {
	local log=$1/e2e.log
	[[ -s $log ]] || { echo "no e2e log"; return; }
	local out="" t
	for t in $(grep -oE '^--- FAIL: Test[A-Za-z0-9_]+' "$log" | awk '{ print $3 }'); do
		local why
		why=$(awk -v t="$t" '$0 ~ "^=== RUN   "t"$" { on = 1; next } on && /_test\.go:[0-9]+:/ { sub(/^[ \t]+/, ""); print; exit }' "$log" | cut -c1-160)
		out+="${out:+; }$t fails (${why:-see the log})"
	done
	# A skip says why on the line before it; the node tests skip in every `make e2e` (they are
	# `make e2e-node`), so they are no difference.
	for t in $(grep -oE '^--- SKIP: Test[A-Za-z0-9_]+' "$log" | awk '{ print $3 }'); do
		local why
		why=$(awk -v t="$t" '$0 ~ "^=== RUN   "t"$" { on = 1; next } on && /_test\.go:[0-9]+:/ { w = $0 } on && $0 ~ "^--- SKIP: "t" " { sub(/^[ \t]+/, "", w); print w; exit }' "$log" | cut -c1-160)
		[[ $why == *"make e2e-node"* ]] && continue
		out+="${out:+; }$t skipped (${why:-see the log})"
	done
	if [[ -z $out && $(<"$1/result") != pass ]]; then
		# The suite failed outside any one test: the control plane did not start, a panic, a timeout.
		out=$(grep -m 1 -E '^(e2e: |panic: |signal: |cluster\.sh: error)' "$log" | cut -c1-200)
		out="the suite failed outside the tests: ${out:-see the log}"
	fi
	echo "${out:-nothing: every test passes}"
}

# counts DIR: "N of M" top-level tests passed, of those that ran (the node tests skip in `make e2e`).
counts() {
	local log=$1/e2e.log pass all
	pass=$(grep -cE '^--- PASS: Test' "$log" 2>/dev/null)
	all=$(grep -cE '^--- (PASS|FAIL): Test' "$log" 2>/dev/null)
	echo "$pass of $all"
}

# ------------------------------------------------------------------- CoreDNS

# coredns VERSION: TestPluginCfgBuild (the README's plugin.cfg install route) against CoreDNS VERSION.
coredns() {
	local v=$1 logf=$OUT/coredns-$1.log
	mkdir -p "$OUT"
	hack/version.sh | awk '{ print $2 }' >"$OUT/coredns-$v.revision"
	(cd test/ops && KUBETREE_PLUGINCFG_COREDNS=$v $GO test -count=1 -run '^TestPluginCfgBuild$' -v . >"$logf" 2>&1)
}

# ---------------------------------------------------------------------- table

BEGIN_MARK='<!-- compat:begin (hack/compat.sh writes this table; do not edit by hand) -->'
END_MARK='<!-- compat:end -->'

# rows: the Markdown of both tables from the results under _out/compat/.
rows() {
	local v dir revs="" dates=""
	# Each run says the commit it ran at (the stamp of the binaries make e2e built) and when.
	for v in $VERSIONS; do
		dir=$(rundir "$v")
		[[ -s $dir/e2e.log ]] || continue
		revs+=" $(cat "$dir/revision" 2>/dev/null || sed -n 's/.*buildinfo\.Revision=\([0-9a-f]*\).*/\1/p' "$dir/make.log" | tail -n 1)"
		dates+=" $(date -u -r "$dir/e2e.log" +%Y-%m-%d)"
	done
	for v in $COREDNS_VERSIONS; do
		[[ -s $OUT/coredns-$v.log ]] || continue
		dates+=" $(date -u -r "$OUT/coredns-$v.log" +%Y-%m-%d)"
		revs+=" $(cat "$OUT/coredns-$v.revision" 2>/dev/null)"
	done
	revs=$(tr ' ' '\n' <<<"$revs" | grep . | sort -u | sed 's/.*/`&`/' | paste -sd ',' | sed 's/,/, /g')
	dates=$(tr ' ' '\n' <<<"$dates" | grep . | sort -u | paste -sd ',' | sed 's/,/, /g')
	echo "Measured on ${dates:-no date} at commit ${revs:-unknown} by \`make compat\` (\`hack/compat.sh\`; logs in \`_out/compat/\`)."
	echo
	echo "| kube-apiserver | result (\`make e2e\`) | streamed list (WatchList) | what differs |"
	echo "| --- | --- | --- | --- |"
	local v dir
	for v in $VERSIONS; do
		dir=$(rundir "$v")
		[[ -s $dir/result ]] || { echo "| $(label "$v") | not run | | |"; continue; }
		local result
		result=$(<"$dir/result")
		if [[ $result == build* ]]; then
			echo "| $(label "$v") | does not build: ${result#build failed: } | | |"
			continue
		fi
		echo "| $(label "$v") | $result: $(counts "$dir") tests passed (\`make e2e\` took $(<"$dir/seconds") s) | $(streamed "$dir") | $(differs "$dir") |"
	done
	echo
	echo "| CoreDNS | plugin.cfg build (TestPluginCfgBuild) | what differs |"
	echo "| --- | --- | --- |"
	for v in $COREDNS_VERSIONS; do
		local logf=$OUT/coredns-$v.log
		if [[ ! -s $logf ]]; then
			echo "| $v | not run | |"
		elif grep -q '^--- PASS: TestPluginCfgBuild' "$logf"; then
			echo "| $v | builds and serves | $(companions "$v") |"
		else
			local why
			why=$(grep -m 3 -E '\.go:[0-9]+:[0-9]+: |^go: |install_test\.go:[0-9]+: ' "$logf" | sed -E 's|^[ \t]+||; s|/[^ :]*/(pkg/mod\|wt-compat\|kubetree)/|\1/|g' | cut -c1-200 | paste -sd ';' | sed 's/;/; /g; s/|/\\|/g')
			echo "| $v | fails | ${why:-see _out/compat/coredns-$v.log} |"
		fi
	done
}

# The companion interfaces kubetree implements (plugin.go, autopath.go, xfr.go, metadata.go), and
# what a CoreDNS without one does not do.
COMPANIONS='cache:ZoneBypasser:the cache plugin does not bypass kubetree'"'"'s zones, so with isolate or topology put no cache in their server block
autopath:AutoPather:autopath @kubetree does not work
transfer:Transferer:the transfer plugin does not transfer kubetree'"'"'s zones
metadata:Provider:kubetree'"'"'s metadata is not there'

# companions VERSION: each companion interface CoreDNS VERSION lacks, with what follows; read from
# its source in the module cache.
companions() {
	local src out="" pkg name what
	src=$($GO mod download -json "github.com/coredns/coredns@$1" 2>/dev/null | awk -F'"' '$2 == "Dir" { print $4 }')
	[[ -n $src ]] || { echo "source not found"; return; }
	while IFS=: read -r pkg name what; do
		grep -qs "^type $name interface" "$src"/plugin/"$pkg"/*.go || out+="${out:+; }no $pkg.$name: $what"
	done <<<"$COMPANIONS"
	echo "${out:-nothing: every companion interface is there}"
}

# table: the rows between the markers of docs/compatibility.md.
table() {
	local doc=docs/compatibility.md body
	body=$(rows)
	grep -qF "$BEGIN_MARK" "$doc" || { log "$doc has no $BEGIN_MARK"; return 1; }
	awk -v b="$BEGIN_MARK" -v e="$END_MARK" -v body="$body" '
		$0 == b { print; print body; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$doc" >"$doc.new" && mv "$doc.new" "$doc"
	log "wrote the table into $doc"
}

# -------------------------------------------------------------------- main

case ${1:-} in
apiserver) apiserver "$2" ;;
build-apiserver) build_apiserver "$2" ;;
e2e) e2e "$2" ;;
coredns) coredns "$2" ;;
table) table ;;
oldest) tr ' ' '\n' <<<"$VERSIONS" | grep . | grep -v / | sort -V | head -n 1 ;;
all)
	for v in $VERSIONS; do
		log "e2e against kube-apiserver $v"
		e2e "$v" || log "kube-apiserver $v: $(<"$(rundir "$v")/result")"
	done
	for v in $COREDNS_VERSIONS; do
		log "plugin.cfg build against CoreDNS $v"
		coredns "$v" || log "CoreDNS $v: fails, see $OUT/coredns-$v.log"
	done
	table
	;;
*)
	sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
