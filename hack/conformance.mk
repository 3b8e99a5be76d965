# hack/conformance.mk — Kubernetes' own DNS e2e tests (issue 18) on the node of hack/node.mk:
# e2e.test built from the pinned k8s.io/kubernetes module (hack/tools), the images its DNS tests
# start built here without Docker, and `make conformance` to run them.
#
# Included by the root Makefile after hack/node.mk (it reuses CP_* and NODE_* from there).
# Not part of `make test`; .ci/run runs conformance-ci (kubetree directly and behind NodeLocal
# DNSCache) after it.

CONF_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

.PHONY: conformance-bins conformance-images conformance conformance-ci

## conformance-bins: bin/e2e.test (Kubernetes' e2e suite), bin/ginkgo (its runner), bin/agnhost, bin/conftable from the pinned module (about 10 min cold)
conformance-bins: $(CP_BIN_DIR)/e2e.test $(CP_BIN_DIR)/ginkgo $(CP_BIN_DIR)/agnhost $(CP_BIN_DIR)/conftable

# ginkgo, the suite's runner (a `tool` of hack/tools, at the version e2e.test is built with): it runs
# e2e.test's specs in parallel processes, as Kubernetes' own hack/ginkgo-e2e.sh does.
$(CP_BIN_DIR)/ginkgo: $(CP_PINS)
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' \
		-o ../../$@ github.com/onsi/ginkgo/v2/ginkgo

# hack/tools/e2e/deps.go keeps the suite's test-only imports in hack/tools' go.mod. -vet=off: the
# suite is upstream's to vet, and go test -c would otherwise vet it at every build.
$(CP_BIN_DIR)/e2e.test: $(CP_PINS) $(CP_TOOLS_DIR)/e2e/deps.go
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) test -c -vet=off $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS) $(CP_K8S_XFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/test/e2e

# agnhost, the suite's all-purpose test binary (a `tool` of hack/tools), static as upstream builds it.
$(CP_BIN_DIR)/agnhost: $(CP_PINS)
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' \
		-o ../../$@ k8s.io/kubernetes/test/images/agnhost

# The userland of both DNS test images: Debian's dig, getent, sh (dash), bash, coreutils and hostname, with
# what they depend on (hack/debroot.sh; needs apt-get update once).
CONF_ROOTFS := _out/rootfs/dnsutils
CONF_DEBS   := bash coreutils dash bind9-dnsutils libc-bin hostname
CONF_ROOTFS_STAMP := $(CONF_ROOTFS)/.debroot-packages

# Made anew when the list (this file) or the script changes.
$(CONF_ROOTFS_STAMP): hack/debroot.sh hack/conformance.mk
	hack/debroot.sh $(CONF_ROOTFS) $(CONF_DEBS)

# The names test/utils/image/manifest.go gives them (k8s.io/kubernetes v1.37.2), so that the suite's
# pods find them on the node (imagePullPolicy IfNotPresent) and nothing is pulled.
CONF_AGNHOST_IMAGE := registry.k8s.io/e2e-test-images/agnhost:2.66.1
CONF_GLIBC_IMAGE   := registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
CONF_PAUSE_IMAGE   := registry.k8s.io/pause:3.10.2
CONF_IMAGES := $(NODE_IMAGE_DIR)/agnhost.tar $(NODE_IMAGE_DIR)/glibc-dns-testing.tar $(NODE_IMAGE_DIR)/e2e-pause.tar

## conformance-images: the suite's agnhost and glibc-dns-testing images on a Debian userland, and its pause (no Docker)
conformance-images: $(CONF_IMAGES)

# Upstream agnhost is Alpine (musl) with bind-tools, curl, iproute2 and others, plus CoreDNS 1.6.2 as
# /coredns; ours is the Debian userland with dig, and our CoreDNS as /coredns. Its getent, the one
# querier of the suite's "musl" role that goes through the C library, resolves with musl as
# upstream's does: hack/resolvers/getent.c, built statically with Debian's musl-tools.
$(CP_BIN_DIR)/getent-musl: hack/resolvers/getent.c
	@mkdir -p $(CP_BIN_DIR)
	@command -v musl-gcc >/dev/null || { echo "musl-gcc is missing: make node-deps (musl-tools)" >&2; exit 1; }
	musl-gcc -static -O2 -Wall -Werror -o $@ $<

$(NODE_IMAGE_DIR)/agnhost.tar: $(CP_BIN_DIR)/agnhost $(CP_BIN_DIR)/coredns-static $(CP_BIN_DIR)/getent-musl $(CP_BIN_DIR)/mkimage $(CONF_ROOTFS_STAMP)
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -oci $(@:.tar=.oci) -tag $(CONF_AGNHOST_IMAGE) -dir $(CONF_ROOTFS):/ \
		-file $(CP_BIN_DIR)/agnhost:/agnhost -file $(CP_BIN_DIR)/coredns-static:/coredns \
		-file $(CP_BIN_DIR)/getent-musl:/usr/bin/getent \
		-entrypoint /agnhost -cmd pause -expose 80/tcp,8080/tcp,8081/tcp,9376/tcp,5000/tcp

# Upstream: debian:bookworm-slim with dnsutils, and CoreDNS 1.5.0 as /coredns.
$(NODE_IMAGE_DIR)/glibc-dns-testing.tar: $(CP_BIN_DIR)/coredns-static $(CP_BIN_DIR)/mkimage $(CONF_ROOTFS_STAMP)
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -oci $(@:.tar=.oci) -tag $(CONF_GLIBC_IMAGE) -dir $(CONF_ROOTFS):/ \
		-file $(CP_BIN_DIR)/coredns-static:/coredns -cmd /bin/bash

# The suite's pause image name on our pause binary (the node's sandboxes use kubetree/pause:1).
$(NODE_IMAGE_DIR)/e2e-pause.tar: $(CP_BIN_DIR)/pause $(CP_BIN_DIR)/mkimage
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -oci $(@:.tar=.oci) -tag $(CONF_PAUSE_IMAGE) -user 65535:65535 -file $<:/pause -entrypoint /pause

# The docs' dnsutils pod ("Debugging DNS Resolution"; hack/dnsutils.yaml), which hack/node.sh starts
# when this image is there: the same Debian userland (nslookup, dig, host), our pause as its main
# process, under the image name of the docs' manifest. Here rather than in node.mk: it needs the
# rootfs above. make run-node and make e2e-node build it.
DNSUTILS_IMAGE := registry.k8s.io/e2e-test-images/agnhost:2.39
$(NODE_IMAGE_DIR)/dnsutils.tar: $(CP_BIN_DIR)/pause $(CP_BIN_DIR)/mkimage $(CONF_ROOTFS_STAMP)
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -tag $(DNSUTILS_IMAGE) -dir $(CONF_ROOTFS):/ -file $(CP_BIN_DIR)/pause:/pause -entrypoint /pause

node-images run-node e2e-node: $(NODE_IMAGE_DIR)/dnsutils.tar

# The resolvers pods really use, in one image (TestNode's resolver table, hack/CONFORMANCE.md): glibc's
# getaddrinfo (gai built against the Debian userland's glibc) and dig, musl's getaddrinfo (gai built
# statically with Debian's musl-tools: make node-deps), Go's pure resolver (dnsq); our pause as its
# main process.
$(CP_BIN_DIR)/gai-glibc: hack/resolvers/gai.c
	@mkdir -p $(CP_BIN_DIR)
	gcc -O2 -Wall -Werror -o $@ $<
$(CP_BIN_DIR)/gai-musl: hack/resolvers/gai.c
	@mkdir -p $(CP_BIN_DIR)
	@command -v musl-gcc >/dev/null || { echo "musl-gcc is missing: make node-deps (musl-tools)" >&2; exit 1; }
	musl-gcc -static -O2 -Wall -Werror -o $@ $<

RESOLVERS_IMAGE := kubetree/resolvers:1
$(NODE_IMAGE_DIR)/resolvers.tar: $(CP_BIN_DIR)/gai-glibc $(CP_BIN_DIR)/gai-musl $(CP_BIN_DIR)/dnsq $(CP_BIN_DIR)/pause $(CP_BIN_DIR)/mkimage $(CONF_ROOTFS_STAMP)
	@mkdir -p $(NODE_IMAGE_DIR)
	$(CP_BIN_DIR)/mkimage -o $@ -tag $(RESOLVERS_IMAGE) -user 65532:65532 -dir $(CONF_ROOTFS):/ \
		-file $(CP_BIN_DIR)/gai-glibc:/usr/local/bin/gai-glibc -file $(CP_BIN_DIR)/gai-musl:/usr/local/bin/gai-musl \
		-file $(CP_BIN_DIR)/dnsq:/usr/local/bin/dnsq -file $(CP_BIN_DIR)/pause:/pause -entrypoint /pause

node-images run-node e2e-node: $(NODE_IMAGE_DIR)/resolvers.tar

# conftable: the results table from the suite's JUnit reports.
$(CP_BIN_DIR)/conftable: $(CP_TOOLS_DIR)/cmd/conftable/main.go $(CP_TOOLS_DIR)/go.mod
	@mkdir -p $(CP_BIN_DIR)
	cd $(CP_TOOLS_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' -o ../../$@ ./cmd/conftable

## conformance: Kubernetes' DNS e2e tests ([sig-network] DNS) on the node: kubetree as the cluster DNS, the in-tree plugin, kubetree behind NodeLocal DNSCache; table in _out/conformance/ (root; long)
conformance: $(NODE_DEPS) conformance-bins conformance-images
	hack/conformance.sh

## conformance-ci: the same suite with kubetree directly and behind NodeLocal DNSCache, not the in-tree column (.ci/run; root)
conformance-ci: $(NODE_DEPS) conformance-bins conformance-images
	KUBETREE_CONFORMANCE_PLUGINS="kubetree nodelocal" hack/conformance.sh

.DEFAULT_GOAL := $(CONF_SAVED_DEFAULT_GOAL)
