# hack/cluster.mk — the kubeadm cluster (issue 38): kubeadm built from the same pinned tools
# module as every other kube binary (hack/tools, k8s.io/kubernetes), the control plane's images
# built here from those binaries, and `make cluster` / `make cluster-down` (hack/cluster.sh... see
# hack/CLUSTER.md).
#
# Included by the root Makefile after hack/node.mk (it reuses CP_* and NODE_* from there).
# It does not change the including Makefile's default goal.

CLUSTER_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

# kubeadm, chained after the node's binaries so that it builds alone on this shared machine.
$(CP_BIN_DIR)/kubeadm: $(CP_PINS) | $(CP_BIN_DIR)/kube-scheduler
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS) $(CP_K8S_XFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/cmd/kubeadm

.DEFAULT_GOAL := $(CLUSTER_SAVED_DEFAULT_GOAL)
