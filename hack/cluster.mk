# hack/cluster.mk — the kubeadm cluster (issue 38; hack/CLUSTER.md): kubeadm built from the same
# pinned tools module as every other kube binary (hack/tools, k8s.io/kubernetes), the images
# kubeadm names built here from those binaries (bin/mkimage, no Docker), and `make cluster` /
# `make cluster-down` (hack/kubeadm-cluster.sh).
#
# Included by the root Makefile after hack/node.mk (it reuses CP_* and NODE_* from there).
# It does not change the including Makefile's default goal.

CLUSTER_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

.PHONY: cluster e2e-cluster cluster-down cluster-status cluster-images clean-cluster

# kubeadm, chained after the node's binaries so that it builds alone on this shared machine.
$(CP_BIN_DIR)/kubeadm: $(CP_PINS) | $(CP_BIN_DIR)/kube-scheduler
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS) $(CP_K8S_XFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/cmd/kubeadm

# CoreDNS at the version kubeadm pins (its CoreDNSVersion constant), from hack/tools/coredns-kubeadm:
# not cmd/coredns's version, and only the plugins kubeadm's Corefile and the upstream use (its
# main.go). The rule fails when the two pins disagree.
CLUSTER_COREDNS_DIR := $(CP_TOOLS_DIR)/coredns-kubeadm
CLUSTER_COREDNS_VERSION = $(shell awk '{ sub(/^require[ \t]+/, "") } $$1 == "github.com/coredns/coredns" { print $$2; exit }' $(CLUSTER_COREDNS_DIR)/go.mod)
CLUSTER_KUBEADM_COREDNS = $(shell cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) list -m -f '{{.Dir}}' k8s.io/kubernetes | \
	xargs -I{} sed -n 's/^\s*CoreDNSVersion = "\(.*\)"/\1/p' {}/cmd/kubeadm/app/constants/constants.go)
$(CP_BIN_DIR)/coredns-kubeadm: $(CLUSTER_COREDNS_DIR)/main.go $(CLUSTER_COREDNS_DIR)/go.mod $(CLUSTER_COREDNS_DIR)/go.sum $(CP_PINS)
	@[ "$(CLUSTER_COREDNS_VERSION)" = "$(CLUSTER_KUBEADM_COREDNS)" ] || { echo "kubeadm pins CoreDNS $(CLUSTER_KUBEADM_COREDNS), $(CLUSTER_COREDNS_DIR)/go.mod $(CLUSTER_COREDNS_VERSION): update the pin"; exit 1; }
	@mkdir -p $(CP_BIN_DIR)
	cd $(CLUSTER_COREDNS_DIR) && $(CP_GOENV) $(CP_GO) build -trimpath -ldflags='-s -w' -o $(CURDIR)/$@ .

# The images kubeadm names under its imageRepository (kubeadm config images list), each an OCI
# layout with its tag beside it (NAME.oci/tag), which hack/kubeadm-cluster.sh pushes to the
# cluster's registry as REPO/NAME:TAG.
CLUSTER_IMAGE_DIR   := _out/cluster-images
CLUSTER_K8S_TAG     := $(CP_K8S_VERSION)
CLUSTER_ETCD_TAG    = $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" { sub(/^v/, "", $$2); print $$2 "-0"; exit }' $(CP_TOOLS_DIR)/go.mod)
CLUSTER_PAUSE_TAG   = $(shell cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) list -m -f '{{.Dir}}' k8s.io/kubernetes | \
	xargs -I{} sed -n 's/^\s*PauseVersion = "\(.*\)"/\1/p' {}/cmd/kubeadm/app/constants/constants.go)
CLUSTER_CP_IMAGES   := kube-apiserver kube-controller-manager kube-scheduler
CLUSTER_IMAGES      := $(foreach i,$(CLUSTER_CP_IMAGES) kube-proxy etcd coredns pause,$(CLUSTER_IMAGE_DIR)/$(i).oci/index.json)

## cluster-images: the images of the kubeadm cluster under _out/cluster-images (no Docker): the control plane's, kube-proxy (with Debian's iptables and nft), etcd, CoreDNS at kubeadm's version, pause
cluster-images: $(CLUSTER_IMAGES)

# The kube binaries and etcd are static (CP_GOENV): their images hold the binary alone, as upstream's
# distroless ones hold little more.
$(foreach i,$(CLUSTER_CP_IMAGES) etcd,$(CLUSTER_IMAGE_DIR)/$(i).oci/index.json): $(CLUSTER_IMAGE_DIR)/%.oci/index.json: $(CP_BIN_DIR)/% $(CP_BIN_DIR)/mkimage
	@mkdir -p $(CLUSTER_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -oci $(@D) -tag kubeadm/$*:$(CLUSTER_TAG_$*) -file $<:/usr/local/bin/$* -entrypoint /usr/local/bin/$*
	echo $(CLUSTER_TAG_$*) >$(@D)/tag
$(foreach i,$(CLUSTER_CP_IMAGES),$(eval CLUSTER_TAG_$(i) = $(CLUSTER_K8S_TAG)))
CLUSTER_TAG_etcd = $(CLUSTER_ETCD_TAG)

# kube-proxy runs iptables-restore (iptables mode) or nft (nftables mode): Debian's, their nft
# backend, as the host's. Debian links iptables to a backend in a maintainer script (update-alternatives),
# which debroot.sh does not run: the links are made here.
CLUSTER_PROXY_ROOTFS := _out/rootfs/kube-proxy
$(CLUSTER_PROXY_ROOTFS)/.debroot-packages: hack/debroot.sh hack/cluster.mk
	hack/debroot.sh $(CLUSTER_PROXY_ROOTFS) dash iptables nftables conntrack
	for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do \
		ln -sf xtables-nft-multi $(CLUSTER_PROXY_ROOTFS)/usr/sbin/$$t; \
		ln -sf ../sbin/$$t $(CLUSTER_PROXY_ROOTFS)/usr/bin/$$t; done
	# mkimage's PATH is /usr/local/bin:/usr/bin:/bin: kube-proxy looks the tools up there.
	ln -sf ../sbin/nft $(CLUSTER_PROXY_ROOTFS)/usr/bin/nft

$(CLUSTER_IMAGE_DIR)/kube-proxy.oci/index.json: $(CP_BIN_DIR)/kube-proxy $(CP_BIN_DIR)/mkimage $(CLUSTER_PROXY_ROOTFS)/.debroot-packages
	@mkdir -p $(CLUSTER_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -oci $(@D) -tag kubeadm/kube-proxy:$(CLUSTER_K8S_TAG) -dir $(CLUSTER_PROXY_ROOTFS):/ \
		-file $<:/usr/local/bin/kube-proxy -entrypoint /usr/local/bin/kube-proxy
	echo $(CLUSTER_K8S_TAG) >$(@D)/tag

# As CoreDNS's own image: user 65532, /coredns with cap_net_bind_service=+ep.
$(CLUSTER_IMAGE_DIR)/coredns.oci/index.json: $(CP_BIN_DIR)/coredns-kubeadm $(CP_BIN_DIR)/mkimage
	@mkdir -p $(CLUSTER_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -oci $(@D) -tag kubeadm/coredns:$(CLUSTER_COREDNS_VERSION) -user 65532:65532 \
		-file $<:/coredns:0755:cap_net_bind_service -entrypoint /coredns -expose 53/tcp,53/udp,9153/tcp
	echo $(CLUSTER_COREDNS_VERSION) >$(@D)/tag

$(CLUSTER_IMAGE_DIR)/pause.oci/index.json: $(CP_BIN_DIR)/pause $(CP_BIN_DIR)/mkimage
	@mkdir -p $(CLUSTER_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -oci $(@D) -tag kubeadm/pause:$(CLUSTER_PAUSE_TAG) -user 65535:65535 -file $<:/pause -entrypoint /pause
	echo $(CLUSTER_PAUSE_TAG) >$(@D)/tag

CLUSTER_DEPS := $(CLUSTER_IMAGES) $(addprefix $(CP_BIN_DIR)/,kubeadm kubelet kubectl registry release coredns-kubeadm)

## cluster: a kubeadm cluster of KUBETREE_CLUSTER_NODES (default 2) nodes on this machine (needs root; hack/CLUSTER.md); waits until every node and kube-system pod is Ready; prints KUBECONFIG
cluster: $(CLUSTER_DEPS)
	hack/kubeadm-cluster.sh up

# make test: the cluster's own builds beside the first tests, TestCluster after them (Makefile).
TEST_BACKGROUND += $(CLUSTER_IMAGES) $(CP_BIN_DIR)/kubeadm $(CP_BIN_DIR)/coredns-kubeadm
TEST_LAST       += e2e-cluster

## e2e-cluster: TestCluster: a kubeadm cluster of 2 nodes from our registry; kubeadm's CoreDNS migrated to kubetree by docs/migrating.md's commands and back while a pod on every node asks (needs root)
e2e-cluster: $(CLUSTER_DEPS) node-images control-plane release
	@mkdir -p _out
	KUBETREE_E2E=1 KUBETREE_E2E_CLUSTER=1 $(TEST_GOENV) $(GO) test -count=1 -timeout 20m -v -run '^TestCluster$$' ./test/e2e/ 2>&1 | tee _out/e2e-cluster.log | \
		grep -E '^(=== RUN|\s*--- |PASS|FAIL|ok|panic)|e2e_report|cluster_.*test.go' ; \
		status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || { echo "e2e-cluster FAILED; the end of _out/e2e-cluster.log:"; tail -n 200 _out/e2e-cluster.log; }; exit $$status

## rollouts: a benchmark (issue 39; it reports, it does not assert): on a kubeadm cluster of 3 nodes, each operation on the cluster DNS (rollout, drain, scale-down, reload, kill, node loss) under lookups from every node as four kinds of client (a socket per lookup, one connected socket, TCP, NodeLocal DNSCache), the in-tree plugin and kubetree; writes _out/rollouts.md, which bench/ROLLOUTS.md keeps (needs root; about 25 min); KUBETREE_PROXY_MODE=nftables for kube-proxy's nftables mode, KUBETREE_ROLLOUTS_REPEAT=N to measure kubetree's planned operations N times, KUBETREE_ROLLOUTS_CONNTRACK=1 to keep every node's conntrack events of DNS over UDP in _out/rollouts-conntrack/
.PHONY: rollouts
rollouts: $(CLUSTER_DEPS) node-images control-plane release
	@mkdir -p _out
	KUBETREE_E2E=1 KUBETREE_E2E_ROLLOUTS=1 KUBETREE_CLUSTER_NODES=3 $(TEST_GOENV) $(GO) test -count=1 -timeout 60m -v -run '^TestRollouts$$' ./test/e2e/ 2>&1 | tee _out/rollouts.log | \
		grep -E '^(=== RUN|\s*--- |PASS|FAIL|ok|panic)|e2e_report|rollouts.*test.go' ; \
		status=$${PIPESTATUS[0]}; [ $$status -eq 0 ] || { echo "rollouts FAILED; the end of _out/rollouts.log:"; tail -n 200 _out/rollouts.log; }; exit $$status

## cluster-down: stop the kubeadm cluster and undo every change it made outside _out/cluster
cluster-down:
	hack/kubeadm-cluster.sh down

## cluster-status: what of the kubeadm cluster runs
cluster-status:
	hack/kubeadm-cluster.sh status

## clean-cluster: remove kubeadm, CoreDNS of kubeadm's version and the cluster's images
clean-cluster:
	rm -f $(CP_BIN_DIR)/kubeadm $(CP_BIN_DIR)/coredns-kubeadm
	rm -rf $(CLUSTER_IMAGE_DIR) $(CLUSTER_PROXY_ROOTFS)

.DEFAULT_GOAL := $(CLUSTER_SAVED_DEFAULT_GOAL)
