# hack/control-plane.mk — builds the local control plane (etcd, kube-apiserver,
# kubectl) from source, from the separate Go module in hack/tools.
#
# Included by the root Makefile (`include hack/control-plane.mk`); it can also
# be used on its own from the repo root: `make -f hack/control-plane.mk control-plane`.
# It does not change the including Makefile's default goal.
# All paths are relative to the repository root (run make from there).
#
# Each binary is rebuilt only when the pins (hack/tools/go.mod, go.sum) or its
# own source changes; a plain `make control-plane` after that is a no-op.

CP_GO        ?= go
# The tools module is built on its own, never through a go.work at the root. Every kube binary,
# etcd, the e2e suite and our tools are static (CGO_ENABLED=0, as upstream builds all but kubelet
# and e2e.test): one compilation of the Kubernetes packages serves them all, make lint's vet and
# the test runs (TEST_GOENV), where a cgo build beside a static one compiled most of it twice.
CP_GOENV     := GOWORK=off CGO_ENABLED=0
CP_TOOLS_DIR := hack/tools
CP_BIN_DIR   := bin
CP_PINS      := $(CP_TOOLS_DIR)/go.mod $(CP_TOOLS_DIR)/go.sum

# Kubernetes version stamped into the binaries (what `kubectl version` and the
# apiserver's /version report); read from the pin so the two never disagree.
CP_K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2; exit }' $(CP_TOOLS_DIR)/go.mod 2>/dev/null)
CP_K8S_MAJOR   := $(word 1,$(subst ., ,$(patsubst v%,%,$(CP_K8S_VERSION))))
CP_K8S_MINOR   := $(word 2,$(subst ., ,$(patsubst v%,%,$(CP_K8S_VERSION))))
CP_K8S_XFLAGS  := $(foreach p,k8s.io/client-go/pkg/version k8s.io/component-base/version,\
	-X $(p).gitVersion=$(CP_K8S_VERSION) -X $(p).gitMajor=$(CP_K8S_MAJOR) \
	-X $(p).gitMinor=$(CP_K8S_MINOR) -X $(p).gitTreeState=clean)

# -trimpath and -s -w: smaller binaries, faster links, no local paths embedded.
CP_GOFLAGS   := -trimpath
CP_LDFLAGS   := -s -w

.PHONY: control-plane clean-control-plane

# Don't let this fragment's first rule become the including Makefile's default goal.
CP_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

## control-plane: build bin/etcd, bin/kube-apiserver and bin/kubectl (once)
control-plane: $(CP_BIN_DIR)/etcd $(CP_BIN_DIR)/kube-apiserver $(CP_BIN_DIR)/kubectl

$(CP_BIN_DIR)/kube-apiserver: $(CP_PINS)
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS) $(CP_K8S_XFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/cmd/kube-apiserver

$(CP_BIN_DIR)/kubectl: $(CP_PINS)
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS) $(CP_K8S_XFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/cmd/kubectl

$(CP_BIN_DIR)/etcd: $(CP_PINS) $(CP_TOOLS_DIR)/cmd/etcd/main.go
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' \
		-o ../../$@ ./cmd/etcd

## clean-control-plane: remove the three control-plane binaries
clean-control-plane:
	rm -f $(CP_BIN_DIR)/etcd $(CP_BIN_DIR)/kube-apiserver $(CP_BIN_DIR)/kubectl

.DEFAULT_GOAL := $(CP_SAVED_DEFAULT_GOAL)
