#!/usr/bin/env bash
# hack/version.sh — the version and revision a build is stamped with (Makefile: -ldflags -X into
# internal/buildinfo), printed as "VERSION REVISION".
#
# VERSION: the release tag on HEAD (vMAJOR.MINOR.PATCH), else the newest version CHANGELOG.md
# names, with -dev (a build between releases). REVISION: HEAD's commit, -dirty with uncommitted
# changes; "unknown" outside a git checkout.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
version=$(git describe --tags --exact-match --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null || true)
if [[ -z $version ]]; then
	version=$(sed -n 's/^## \[\(v[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)\].*/\1/p' CHANGELOG.md | head -n 1)
	version=${version:-v0.0.0}-dev
fi
revision=unknown
if git rev-parse --git-dir >/dev/null 2>&1; then
	revision=$(git rev-parse --short=12 HEAD)
	git diff --quiet HEAD -- 2>/dev/null || revision+=-dirty
fi
echo "$version $revision"
