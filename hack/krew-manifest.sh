#!/usr/bin/env bash
# hack/krew-manifest.sh OUT VERSION — OUT/kubetree.yaml, the krew manifest of release VERSION whose
# archives (kubectl-kubetree_VERSION_OS_ARCH.tar.gz) are in OUT (hack/kubectl-release.sh makes them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
OUT=${1:?OUT}
VERSION=${2:?VERSION}
# The krew manifest of the release: plugins/kubetree.yaml filled in as krew-release-bot fills it in:
# the tag for {{ .TagName }}, and each {{addURIAndSha "URL" .TagName }} line turned into the uri and
# the sha256 of the archive it names (the bot puts the sha256 line at a four-space indent).
awk -v version="$VERSION" -v out="$OUT" '
	function tagged(s) { gsub(/\{\{ \.TagName \}\}/, version, s); return s }
	match($0, /^ *\{\{addURIAndSha "[^"]*" \.TagName \}\}$/) {
		indent = substr($0, 1, index($0, "{{") - 1)
		uri = $0; sub(/^ *\{\{addURIAndSha "/, "", uri); sub(/" \.TagName \}\}$/, "", uri); uri = tagged(uri)
		archive = uri; sub(/.*\//, "", archive); archive = out "/" archive
		cmd = "sha256sum \"" archive "\" 2>/dev/null"; sum = ""; cmd | getline sum; close(cmd); split(sum, f, " ")
		if (f[1] == "") { print "kubectl-release: plugins/kubetree.yaml names " archive ", which KUBECTL_RELEASE_PLATFORMS does not build" > "/dev/stderr"; failed = 1 }
		print indent "uri: " uri
		print "    sha256: " f[1]
		next
	}
	{ print tagged($0) }
	END { exit failed }
' "$ROOT/plugins/kubetree.yaml" >"$OUT/kubetree.yaml"
if grep -nE '^[[:space:]]*[^#[:space:]].*\{\{' "$OUT/kubetree.yaml"; then
	echo "kubectl-release: plugins/kubetree.yaml has a placeholder that krew-release-bot does not fill in" >&2
	exit 1
fi
echo "krew manifest: $OUT/kubetree.yaml"
