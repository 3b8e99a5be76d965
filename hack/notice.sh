#!/usr/bin/env bash
# hack/notice.sh — NOTICE: kubetree's own notice, then the NOTICE file of every module compiled
# into cmd/coredns (the binary and image we ship) or cmd/kubectl-kubetree (the kubectl plugin's
# release archives) that has one, as the Apache License 2.0 (4 d) asks of a redistribution. The
# modules are those `go list -deps` finds for them, which is what `go version -m` lists.
#
# Usage: hack/notice.sh          write NOTICE
#        hack/notice.sh --check  fail when NOTICE is not what this would write
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
export GOWORK=off GOFLAGS=-mod=mod

notice() {
	cat <<-'HEAD'
		kubetree
		Copyright 2026 The kubetree Authors

		This product includes software developed by the kubetree authors, licensed under the
		Apache License, Version 2.0 (LICENSE). It is compiled into CoreDNS and into kubectl-kubetree
		with the modules below; those whose licences carry a NOTICE file have it reproduced here, as
		they ask.
	HEAD
	local path version dir f
	local modules='{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}'
	{ (cd "$ROOT/cmd/coredns" && go list -deps -f "$modules" .); (cd "$ROOT" && go list -deps -f "$modules" ./cmd/kubectl-kubetree); } |
		sort -u |
		while read -r path version dir; do
			# kubetree itself (a replace of ../.. in cmd/coredns) has this NOTICE.
			[[ -n $dir && $path != github.com/kubetree/kubetree ]] || continue
			for f in NOTICE NOTICE.txt NOTICE.md; do
				[[ -f $dir/$f ]] || continue
				printf '\n================================================================================\n'
				printf '%s %s (%s)\n\n' "$path" "$version" "$f"
				sed -e 's/[[:space:]]*$//' "$dir/$f"
			done
		done
}

case ${1:-} in
--check)
	if ! diff -q <(notice) "$ROOT/NOTICE" >/dev/null; then
		echo "NOTICE is not what hack/notice.sh writes for cmd/coredns's modules: run make notice" >&2
		exit 1
	fi
	;;
"") notice >"$ROOT/NOTICE" ;;
*)
	echo "usage: hack/notice.sh [--check]" >&2
	exit 2
	;;
esac
