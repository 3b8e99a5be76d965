# hack/node.mk — the single-node cluster: node binaries built from the same pinned
# tools module as the control plane (hack/tools, k8s.io/kubernetes v1.37.2), the
# images built here without Docker, and the targets that run them.
#
# Included by the root Makefile after hack/control-plane.mk (it reuses CP_* from there).
# It does not change the including Makefile's default goal.

NODE_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

NODE_KUBE_BINS := kubelet kube-proxy kube-controller-manager kube-scheduler

.PHONY: node-deps node-bins node-images run-node e2e-node clean-node-bins

## node-deps: the Debian packages the node needs (as root): containerd, runc, CNI plugins, iptables, nft, conntrack; musl-tools for the resolvers image; curl (the registry's readiness)
node-deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		containerd runc containernetworking-plugins iptables nftables conntrack musl-tools curl

## node-bins: bin/kubelet, bin/kube-proxy, bin/kube-controller-manager, bin/kube-scheduler (once; one at a time)
node-bins: $(addprefix $(CP_BIN_DIR)/,$(NODE_KUBE_BINS))

# One pattern rule for the four; each go build already uses every core, so they are chained
# (order-only) to build one at a time even under make -j on this shared 2-core machine.
$(addprefix $(CP_BIN_DIR)/,$(NODE_KUBE_BINS)): $(CP_BIN_DIR)/%: $(CP_PINS)
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS) $(CP_K8S_XFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/cmd/$*

$(CP_BIN_DIR)/kube-proxy: | $(CP_BIN_DIR)/kubelet
$(CP_BIN_DIR)/kube-controller-manager: | $(CP_BIN_DIR)/kube-proxy
$(CP_BIN_DIR)/kube-scheduler: | $(CP_BIN_DIR)/kube-controller-manager

# Small static programs of ours from the tools module (the standard library, and x/net's dnsmessage for dnsq: seconds to build).
NODE_OWN_BINS := pause dnsq
$(addprefix $(CP_BIN_DIR)/,$(NODE_OWN_BINS)): $(CP_BIN_DIR)/%: $(CP_TOOLS_DIR)/cmd/%/main.go $(CP_TOOLS_DIR)/go.mod
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' -o ../../$@ ./cmd/$*
# dnsq is more than one file (its loop): any of them rebuilds it.
$(CP_BIN_DIR)/dnsq: $(filter-out %_test.go,$(wildcard $(CP_TOOLS_DIR)/cmd/dnsq/*.go))

# The image builder is a module of its own (hack/tools/cmd/mkimage/go.mod): go-containerregistry
# stays out of the pins the node's binaries and e2e.test are built from.
MKIMAGE_DIR := $(CP_TOOLS_DIR)/cmd/mkimage
$(CP_BIN_DIR)/mkimage: $(filter-out %_test.go,$(wildcard $(MKIMAGE_DIR)/*.go)) $(MKIMAGE_DIR)/go.mod $(MKIMAGE_DIR)/go.sum
	@mkdir -p $(CP_BIN_DIR)
	cd $(MKIMAGE_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' -o $(CURDIR)/$@ .

# deploy/Dockerfile's recipe without Docker: CoreDNS + kubetree, static (CGO_ENABLED=0).
$(CP_BIN_DIR)/coredns-static: $(PLUGIN_SOURCES) go.mod go.sum $(wildcard cmd/coredns/*.go cmd/coredns/internal/*/*.go) cmd/coredns/go.mod cmd/coredns/go.sum
	@mkdir -p $(CP_BIN_DIR)
	cd cmd/coredns && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags='-s -w $(STAMP)' -o ../../$@ .

# The images, as docker archives that `ctr -n k8s.io images import` reads (hack/node.sh imports them),
# and each as an OCI image layout beside it (NAME.oci/), both checked by mkimage with the library's validate.Image.
NODE_IMAGE_DIR := _out/images
NODE_IMAGES    := $(NODE_IMAGE_DIR)/coredns.tar $(NODE_IMAGE_DIR)/pause.tar $(NODE_IMAGE_DIR)/dnsq.tar \
	$(NODE_IMAGE_DIR)/coredns-stock.oci/index.json

## node-images: the kubetree/coredns, pause and dnsq images under _out/images (no Docker), and stock CoreDNS (coredns-stock.oci) for the migration test
node-images: $(NODE_IMAGES)

# deploy/deployment.yaml's image: user 65532, /coredns with cap_net_bind_service=+ep (as setcap in the Dockerfile).
$(NODE_IMAGE_DIR)/coredns.tar: $(CP_BIN_DIR)/coredns-static $(CP_BIN_DIR)/mkimage
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -oci $(@:.tar=.oci) -tag kubetree/coredns:latest -user 65532:65532 \
		-file $<:/coredns:0755:cap_net_bind_service -entrypoint /coredns -expose 53/tcp,53/udp,9153/tcp

# CoreDNS as released, without kubetree (its own main package, at the version cmd/coredns requires):
# the in-tree plugin's image that TestNode's migration starts from and goes back to. An OCI layout
# only: the test pushes it to the node's registry, from which the node pulls it.
$(CP_BIN_DIR)/coredns-stock: cmd/coredns/go.mod cmd/coredns/go.sum
	@mkdir -p $(CP_BIN_DIR)
	cd cmd/coredns && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags='-s -w' -o ../../$@ github.com/coredns/coredns

$(NODE_IMAGE_DIR)/coredns-stock.oci/index.json: $(CP_BIN_DIR)/coredns-stock $(CP_BIN_DIR)/mkimage
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -oci $(NODE_IMAGE_DIR)/coredns-stock.oci -tag coredns/coredns:$$(awk '$$1 == "github.com/coredns/coredns" { print $$2; exit }' cmd/coredns/go.mod) \
		-user 65532:65532 -file $<:/coredns:0755:cap_net_bind_service -entrypoint /coredns -expose 53/tcp,53/udp,9153/tcp

$(NODE_IMAGE_DIR)/pause.tar: $(CP_BIN_DIR)/pause $(CP_BIN_DIR)/mkimage
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -oci $(@:.tar=.oci) -tag kubetree/pause:1 -user 65535:65535 -file $<:/pause -entrypoint /pause

$(NODE_IMAGE_DIR)/dnsq.tar: $(CP_BIN_DIR)/dnsq $(CP_BIN_DIR)/mkimage
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -oci $(@:.tar=.oci) -tag kubetree/dnsq:1 -user 65532:65532 -file $<:/dnsq -entrypoint /dnsq

# The node runs kubetree's release (make release), pulled from its own registry (bin/registry).
NODE_DEPS := control-plane node-bins node-images build $(CP_BIN_DIR)/registry release

## run-node: the single-node cluster with kubetree as its DNS (needs root); prints KUBECONFIG; Ctrl-C stops it
run-node: $(NODE_DEPS)
	hack/run-node.sh

## e2e-node: TestNode: client pods resolve through kubetree and the in-tree plugin on a real node (glibc, musl, Go, dig); rollout, PDB; then TestNodeServingTerminating (needs root; about 5 minutes)
e2e-node: $(NODE_DEPS)
	@mkdir -p _out
	KUBETREE_E2E=1 KUBETREE_E2E_NODE=1 $(TEST_GOENV) $(GO) test -count=1 -timeout 15m -v -run '^TestNode' ./test/e2e/ 2>&1 | tee _out/e2e-node.log | \
		grep -E '^(=== RUN|\s*--- |PASS|FAIL|ok|panic)|e2e_report|node_test.go' ; \
		status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || { echo "e2e-node FAILED; the end of _out/e2e-node.log (node.sh's own reasons included):"; \
		tail -n 200 _out/e2e-node.log; }; exit $$status

## clean-node-bins: remove the node binaries
clean-node-bins:
	rm -f $(addprefix $(CP_BIN_DIR)/,$(NODE_KUBE_BINS) $(NODE_OWN_BINS) mkimage coredns-static coredns-stock)
	rm -rf $(NODE_IMAGE_DIR)

.DEFAULT_GOAL := $(NODE_SAVED_DEFAULT_GOAL)
