#!/usr/bin/env bash
# Prints each production package of the module with the module's packages it imports: the import
# graph of the layers, top down. TestLayers (test/repo/layers_test.go) checks that every import points down.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' . ./external/... ./internal/... ./cmd/kubectl-kubetree/... |
  grep -v -e /k8stest -e /plugintest |
  awk -v mod="$mod" '{
    line = $1 " ->"; sub(mod "/?", "", line); if (line ~ /^ ->/) line = "(root)" line
    n = 0
    for (i = 2; i <= NF; i++) if (index($i, mod "/") == 1) { dep = $i; sub(mod "/", "", dep); line = line " " dep; n++ }
    if (n == 0) line = line " (nothing of the module)"
    print line
  }'
