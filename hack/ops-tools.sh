#!/usr/bin/env bash
# hack/ops-tools.sh OUT — `make ops-tools`: the checks that need promtool and helm (built from source,
# pinned in hack/ops-tools: minutes of compiling that make test does not pay on every run). OUT
# records the sha256 of every file those checks read, then their output; it is written only when
# all of them pass. make test's TestOpsToolsRunIsCurrent fails when one of those files has changed
# since: run `make ops-tools` and commit OUT.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
OUT=${1:?OUT}
cd "$ROOT"
inputs=(deploy/monitoring/kubetree.rules.yaml deploy/monitoring/kubetree.rules.test.yaml
	deploy/helm/values.yaml deploy/helm/autoscaler-rbac.yaml deploy/autoscaler/autoscaler.yaml
	deploy/configmap.yaml deploy/deployment.yaml deploy/service.yaml deploy/rbac.yaml deploy/pods-verified/rbac.yaml
	test/ops/helm_test.go test/ops/autoscaler_test.go hack/ops-tools/go.mod hack/ops-tools/go.sum)
tmp=$(mktemp) && trap 'rm -f "$tmp"' EXIT
{
	echo "# make ops-tools (hack/ops-tools.sh): the files its checks read, then what the checks printed."
	echo "# make test fails when a file below no longer has this sha256: run make ops-tools, commit this file."
	(cd "$ROOT" && sha256sum "${inputs[@]}")
	echo
	echo "\$ promtool check rules deploy/monitoring/kubetree.rules.yaml"
	bin/promtool check rules deploy/monitoring/kubetree.rules.yaml 2>&1
	echo "\$ promtool test rules kubetree.rules.test.yaml"
	(cd deploy/monitoring && ../../bin/promtool test rules kubetree.rules.test.yaml 2>&1)
	echo "\$ go test -run 'Helm' -v ./test/ops (helm template of the CoreDNS chart)"
	(cd test/ops && GOWORK=off KUBETREE_HELM="$ROOT/bin/helm" go test -count=1 -run 'Helm' -v . 2>&1) |
		grep -E '^(\s*--- |ok|FAIL|PASS)' | sed -E 's/ \([0-9.]+s\)$//; s/^(ok\s+\S+)\s+[0-9.]+s$/\1/'
} >"$tmp" || { cat "$tmp"; echo "ops-tools: a check failed; $OUT is unchanged" >&2; exit 1; }
# Every helm test ran: a skipped one (no chart beside the repository) checked nothing.
if grep -q -- '--- SKIP' "$tmp"; then
	cat "$tmp"; echo "ops-tools: a helm test was skipped (is ../shared/third_party/coredns-helm-chart there?); $OUT is unchanged" >&2; exit 1
fi
cp "$tmp" "$OUT"
cat "$OUT"
