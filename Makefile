# kubetree: `make run` serves the example cluster, `make test` runs every test.
SHELL := /bin/bash
GO    ?= go

.PHONY: build run test unit lint e2e clean notice scale bench bench-audit bench-steady bench-watchcost bench-fleet bench-pods allocs soak fuzz
.DEFAULT_GOAL := build

# The plugin's sources: the root package, internal/ and external/ (tests aside).
PLUGIN_SOURCES := $(filter-out %_test.go,$(wildcard *.go)) $(shell find internal external -name '*.go' -not -name '*_test.go')

# The version and revision every CoreDNS build is stamped with (internal/buildinfo, hack/version.sh):
# coredns_kubetree_build_info and the first log line say them. VERSION=vX.Y.Z overrides.
VERSION  ?= $(word 1,$(shell hack/version.sh))
REVISION ?= $(word 2,$(shell hack/version.sh))
STAMP    := -X github.com/kubetree/kubetree/internal/buildinfo.Version=$(VERSION) -X github.com/kubetree/kubetree/internal/buildinfo.Revision=$(REVISION)

## build: CoreDNS with kubetree (and every standard plugin) into bin/coredns, and the kubectl plugin into bin/kubectl-kubetree
build: bin/coredns bin/kubectl-kubetree

# Static and -trimpath, as the image's and the release's builds (hack/node.mk, hack/release.mk) are:
# one compilation of CoreDNS serves all three, which differ only in the link.
bin/coredns: $(PLUGIN_SOURCES) go.mod go.sum $(wildcard cmd/coredns/*.go cmd/coredns/internal/*/*.go) cmd/coredns/go.mod cmd/coredns/go.sum
	@mkdir -p bin
	cd cmd/coredns && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags='$(STAMP)' -o ../../bin/coredns .

# The kubectl plugin (docs/kubectl-plugin.md): it reads the explain endpoint's types from internal/explainapi.
bin/kubectl-kubetree: $(PLUGIN_SOURCES) go.mod go.sum $(shell find cmd/kubectl-kubetree -name '*.go' -not -name '*_test.go')
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -o $@ ./cmd/kubectl-kubetree

## kubectl-release: the kubectl plugin's release archives for VERSION and their krew manifest (plugins/kubetree.yaml filled in) under _out/kubectl-release
.PHONY: kubectl-release
kubectl-release:
	hack/kubectl-release.sh _out/kubectl-release $(VERSION)

## run: the main job — serve the cluster in KUBECONFIG, or a local one with examples/, on 127.0.0.1:1053
run: build control-plane
	hack/run.sh

## test: linters, unit tests (with -race), the release (make release-test), end-to-end tests against a real kube-apiserver and bin/coredns, TestNode (a real node, as root), the ops checks and TestCluster (a kubeadm cluster, as root)
# The end-to-end tests mostly wait (on the API server, on pods, on timeouts) while the cores sit
# idle. What only computes and that no test waits for (the linters, the kubeadm cluster's images)
# runs beside them at the lowest priority, where it takes what they leave and never delays them:
# on a fresh machine that is make lint's 7 minutes and most of the cluster images' build. First
# the binaries both sides use are built (TEST_FIRST), so that the two never build one thing; then
# TEST_LAST, which needs the background's work, waits for it. The background's output goes to
# _out/test-background.log, printed when it ends.
TEST_FIRST      = $(NODE_DEPS)
TEST_FOREGROUND := e2e e2e-node unit release-test
TEST_BACKGROUND := lint $(TEST_BUILD_BESIDE)
# What the caller needs next, built in the background too (.ci/run: Kubernetes' suite and images).
TEST_BUILD_BESIDE ?=
TEST_LAST       :=
# Its release (made and checked, then run by the node and the cluster) is this machine's platform's
# alone; make release-test checks every platform's (hack/release.mk).
TEST_MAKE       = $(MAKE) --no-print-directory RELEASE_PLATFORMS=linux/$(shell $(GO) env GOARCH) KUBECTL_RELEASE_PLATFORMS=linux/$(shell $(GO) env GOARCH)
test:
	@mkdir -p _out
	$(TEST_MAKE) $(TEST_FIRST)
	@echo "test: beside the tests, at nice 19 (_out/test-background.log): $(TEST_BACKGROUND)"
	@{ nice -n 19 $(TEST_MAKE) $(TEST_BACKGROUND); st=$$?; date "+test: the background ended at %T"; exit $$st; } >_out/test-background.log 2>&1 & bg=$$!; \
		date "+test: the tests began at %T"; \
		$(TEST_MAKE) $(TEST_FOREGROUND); fg=$$?; \
		date "+test: the tests ended at %T"; \
		wait $$bg; bgst=$$?; \
		echo "test: the background's output (exit $$bgst):"; cat _out/test-background.log; \
		[ $$fg -eq 0 ] && [ $$bgst -eq 0 ] || exit 1
	$(if $(strip $(TEST_LAST)),$(TEST_MAKE) $(TEST_LAST))

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)
	# Raw reads are left out of race builds (rawread_other.go): their own test runs without -race.
	$(TEST_GOENV) $(GO) test -count=1 -run 'TestRawRead' ./internal/apiclient
	cd hack/tools && $(LINT_GOENV) $(GO) test -count=1 ./...
	cd hack/tools/cmd/mkimage && $(LINT_GOENV) $(GO) test -count=1 ./...
	cd hack/tools/cmd/release && $(LINT_GOENV) $(GO) test -count=1 ./...

## layers: the import graph of the module's packages (TestLayers checks it points down only)
.PHONY: layers
layers:
	@hack/layers.sh

## lint: gofmt, go vet and staticcheck (pinned in hack/lint) over every module of the repository
LINT_MODULES := . cmd/coredns test/e2e bench hack/tools hack/tools/cmd/mkimage hack/tools/cmd/release hack/tools/registry
lint: bin/staticcheck
	@hack/notice.sh --check
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './_out/*' -not -path './bin/*')); \
		if [ -n "$$unformatted" ]; then echo "gofmt -l would change:"; echo "$$unformatted"; exit 1; fi
	@for m in $(LINT_MODULES); do echo "vet, staticcheck: $$m"; \
		(cd $$m && $(LINT_GOENV) $(GO) vet ./... && $(LINT_GOENV) $(CURDIR)/bin/staticcheck ./...) || exit 1; done

# vet, staticcheck and every test run without the race detector compile their dependencies with the
# flags of the static builds (make build, the images, the release, hack/control-plane.mk's CP_GOENV),
# so they find those compilations in the build cache instead of making their own: on a fresh
# machine, cmd/coredns's vet took 373 s with the default flags and 94 s with these, after make build.
TEST_GOENV := CGO_ENABLED=0 GOFLAGS='$(strip $(GOFLAGS) -trimpath)'
LINT_GOENV := GOWORK=off $(TEST_GOENV)

## notice: NOTICE anew, from the NOTICE files of the modules compiled into cmd/coredns (make lint checks it)
notice:
	hack/notice.sh

bin/staticcheck: hack/lint/go.mod hack/lint/go.sum
	@mkdir -p bin
	cd hack/lint && GOWORK=off $(GO) build -o ../../bin/staticcheck honnef.co/go/tools/cmd/staticcheck

# The end-to-end tests run a CoreDNS built with -race, so that the plugin's goroutines are checked
# under real traffic too (a detected race fails the test): cmd/coredns/race, without the cloud and
# tracing plugins no test uses, whose SDKs the race build would compile again.
bin/coredns-race: $(PLUGIN_SOURCES) go.mod go.sum $(wildcard cmd/coredns/race/*.go cmd/coredns/internal/*/*.go) cmd/coredns/go.mod cmd/coredns/go.sum
	@mkdir -p bin
	cd cmd/coredns && $(GO) build -race -ldflags='$(STAMP)' -o ../../bin/coredns-race ./race

# TestImage checks the image node-images builds (_out/images/coredns.tar, hack/node.mk).
e2e: build control-plane bin/coredns-race _out/images/coredns.tar
	@mkdir -p _out
	KUBETREE_E2E=1 KUBETREE_COREDNS=$(CURDIR)/bin/coredns-race $(GO) test -race -count=1 -parallel 4 -timeout 30m -v ./test/e2e/ 2>&1 | tee _out/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_report' ; \
		status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || tail -n 400 _out/e2e.log; exit $$status

## bench: kubernetes vs kubetree vs whoami on a synthetic cluster; writes bench/RESULTS.md (see bench/README.md)
bench: build control-plane
	cd bench && $(GO) run . $(BENCH_FLAGS)

## scale: 100k services and 1M endpoints through the informer path, no API server; heap per service and endpoint
scale:
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x ./test/perf -args -scale.services=$(SCALE_SERVICES) -scale.endpoints=10 -scale.updates=20000 $(SCALE_FLAGS)
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkAudit$$' -benchtime 3x -benchmem ./test/perf -args -scale.services=10000 -scale.endpoints=10

## bench-audit: what the audit costs the API server at 1M endpoints, beside the in-tree plugin; writes bench/AUDIT.md
bench-audit: build control-plane
	cd bench && $(GO) run . -audit -services 10000 -endpoints 100 -headless 0.5 $(BENCH_FLAGS)

## bench-steady: what a replica costs the API server per hour under 10 slice updates/s at 1M endpoints, kubetree
## (watches and audit) beside the in-tree plugin; BENCH_FLAGS='-steady-kubetree NAME=BINARY' adds a build; writes bench/STEADY.md
bench-steady: build control-plane
	cd bench && $(GO) run . -steady -services 10000 -endpoints 100 -headless 0.5 $(BENCH_FLAGS)

## bench-watchcost: what a plain EndpointSlice watch (HTTP/2, HTTP/1.1) and kubetree's audit cost the API server
## at 1M endpoints under 10 slice updates/s, and the audit interval within 1.05x of an in-tree replica; writes bench/WATCHCOST.md
bench-watchcost: build control-plane
	cd bench && $(GO) run . -watch-cost 64 -services 10000 -endpoints 100 -headless 0.5 -steady-window 75s $(BENCH_FLAGS)

## bench-fleet: a relist storm, 6 replicas of each plugin against one API server at 1M endpoints under 300
## slice updates/s, and the time from a change to its answer; writes bench/FLEET.md (as root: memory cgroups)
bench-fleet: build control-plane
	cd bench && $(GO) run . -fleet 6 -services 10000 -endpoints 100 -headless 0.5 $(BENCH_FLAGS)

## bench-pods: pods verified and autopath, kubetree beside kubernetes, at BENCH_PODS pods; writes bench/PODS.md
BENCH_PODS ?= 10000,50000
bench-pods: build control-plane
	cd bench && $(GO) run . -pods $(BENCH_PODS) $(BENCH_FLAGS)

## allocs: allocations per ServeDNS, kubetree beside the in-tree kubernetes plugin, query by query
allocs:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkServeDNSAgainstKubernetes$$' -benchmem -benchtime 2000x ./test/plugin | \
		awk '/allocs\/op/ { split($$1, p, "/"); sub(/-[0-9]+$$/, "", p[3]); q = p[2]; a[q, p[3]] = $$(NF-1); if (!(q in seen)) { seen[q] = 1; order[++k] = q } } \
		END { printf "%-40s %9s %11s %6s\n", "query", "kubetree", "kubernetes", "ratio"; \
		for (i = 1; i <= k; i++) { q = order[i]; kt = a[q, "kubetree"]; k8 = a[q, "kubernetes"]; \
		printf "%-40s %9d %11d %6.2f\n", q, kt, k8, (k8 ? kt / k8 : 0) } }'

SCALE_SERVICES ?= 100000
# SCALE_FLAGS: more BenchmarkScale flags, such as -scale.zonal or -scale.topology -scale.nodes=3000
SCALE_FLAGS ?=

## soak: TestSoak for $(SOAKTIME): API churn while queries are checked against the API state
SOAKTIME ?= 10m
soak: build control-plane
	KUBETREE_E2E=1 $(GO) test -count=1 -timeout 30m -run TestSoak -v ./test/e2e/ -args -soak.duration=$(SOAKTIME)

## fuzz: each fuzz target for $(FUZZTIME); new crashers land in its package's testdata/fuzz, which go test replays
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzServeDNS$$' -fuzztime $(FUZZTIME) ./test/fuzz
	$(GO) test -run '^$$' -fuzz '^FuzzObjectsToRecords$$' -fuzztime $(FUZZTIME) ./test/fuzz
	$(GO) test -run '^$$' -fuzz '^FuzzSliceCodec$$' -fuzztime $(FUZZTIME) ./internal/object
	$(GO) test -run '^$$' -fuzz '^FuzzPodCodec$$' -fuzztime $(FUZZTIME) ./internal/object
	$(GO) test -run '^$$' -fuzz '^FuzzServiceCodec$$' -fuzztime $(FUZZTIME) ./internal/object
	$(GO) test -run '^$$' -fuzz '^FuzzHandlers$$' -fuzztime $(FUZZTIME) ./internal/explain

## ops-test: the PrometheusRule against the rules file, the rules and the Grafana dashboard name only
## existing metrics, NodeLocal's manifests, bench's charts; and that test/ops/ops-tools.txt, the last
## make ops-tools, checked the rules and the Helm values as they are now
.PHONY: ops-test ops-tools monitoring
TEST_FOREGROUND += ops-test
LINT_MODULES += test/ops
ops-test:
	cd test/ops && $(LINT_GOENV) $(GO) test -count=1 ./...
	cd bench && $(LINT_GOENV) $(GO) test -count=1 ./...

## ops-tools: promtool check/test rules and helm template of the CoreDNS chart (promtool and helm
## built from source, pinned in hack/ops-tools); writes test/ops/ops-tools.txt: commit it
ops-tools: bin/promtool bin/helm
	hack/ops-tools.sh test/ops/ops-tools.txt

## monitoring: write deploy/monitoring/prometheusrule.yaml from kubetree.rules.yaml
monitoring:
	cd test/ops && GOWORK=off $(GO) test -count=1 -run '^TestPrometheusRuleMatchesRulesFile$$' . -update

# promtool without the service-discovery plugins (remove_all_sd): rules need none, and they are
# most of its build.
bin/promtool: hack/ops-tools/go.mod hack/ops-tools/go.sum
	@mkdir -p bin
	cd hack/ops-tools && GOWORK=off $(GO) build -tags remove_all_sd -o ../../bin/promtool github.com/prometheus/prometheus/cmd/promtool

bin/helm: hack/ops-tools/go.mod hack/ops-tools/go.sum
	@mkdir -p bin
	cd hack/ops-tools && GOWORK=off $(GO) build -o ../../bin/helm helm.sh/helm/v3/cmd/helm

clean:
	rm -rf bin _out

include hack/control-plane.mk
include hack/node.mk
include hack/cluster.mk
include hack/conformance.mk
include hack/release.mk
include hack/compat.mk
