#!/usr/bin/env bash
# hack/kubectl-release.sh OUT VERSION — the release archives of kubectl-kubetree that
# plugins/kubetree.yaml points at: OUT/kubectl-kubetree_VERSION_OS_ARCH.tar.gz for each platform
# the manifest names, each holding kubectl-kubetree, LICENSE and NOTICE, with OUT/SHA256SUMS. The archives
# are reproducible (-trimpath, no VCS stamp, tar without times or owners, gzip -n): the sha256 krew
# checks can be made again from the tag. KUBECTL_DNSQ_IMAGE (make release sets it to its dnsq.ref)
# is stamped in as doctor's default --image.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
OUT=${1:?OUT}
VERSION=${2:?VERSION}
ALL_PLATFORMS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64" # plugins/kubetree.yaml's
PLATFORMS=${KUBECTL_RELEASE_PLATFORMS:-$ALL_PLATFORMS}
LDFLAGS='-s -w'
if [[ -n ${KUBECTL_DNSQ_IMAGE:-} ]]; then
	LDFLAGS+=" -X github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/cli.dnsqImage=$KUBECTL_DNSQ_IMAGE"
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
for p in $PLATFORMS; do
	os=${p%/*} arch=${p#*/}
	dir=$(mktemp -d)
	(cd "$ROOT" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags="$LDFLAGS" \
		-o "$dir/kubectl-kubetree" ./cmd/kubectl-kubetree)
	cp "$ROOT/LICENSE" "$ROOT/NOTICE" "$dir/"
	tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - kubectl-kubetree LICENSE NOTICE |
		gzip -n -9 >"$OUT/kubectl-kubetree_${VERSION}_${os}_${arch}.tar.gz"
	rm -rf "$dir"
done
(cd "$OUT" && sha256sum kubectl-kubetree_"${VERSION}"_*.tar.gz >SHA256SUMS && cat SHA256SUMS)
# The manifest names every platform's archive: a release of some platforms (make test's) has none.
if [[ $PLATFORMS != "$ALL_PLATFORMS" ]]; then
	echo "krew manifest: not written (KUBECTL_RELEASE_PLATFORMS=$PLATFORMS builds some platforms only)"
	exit 0
fi
hack_dir=$(dirname "${BASH_SOURCE[0]}")
"$hack_dir/krew-manifest.sh" "$OUT" "$VERSION"
