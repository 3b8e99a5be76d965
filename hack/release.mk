# hack/release.mk — `make release VERSION=vX.Y.Z`: what a platform team adopts, under
# _out/release/VERSION/ (docs/releasing.md says what each file is):
#
#   coredns-linux-amd64, coredns-linux-arm64   CoreDNS + kubetree, static, stamped with VERSION
#   coredns-linux-*.cdx.json                    their SBOMs (CycloneDX JSON, by cyclonedx-gomod)
#   image/                                      the multi-arch image: an OCI image index (OCI layout)
#   image.ref                                   IMAGE_REPO@sha256:... — the index, by digest
#   dnsq-linux-amd64, dnsq-linux-arm64, *.cdx.json, dnsq-image/, dnsq.ref
#                                               the same for dnsq (hack/tools/cmd/dnsq), the client in
#                                               kubectl kubetree doctor's pods: DNSQ_IMAGE_REPO, whose
#                                               digest the kubectl plugin's archives name as its default
#   deploy/                                     deploy/'s manifests and Helm values, the image pinned by digest
#   kubectl/                                    the kubectl plugin's archives and their krew manifest
#                                               (hack/kubectl-release.sh)
#   SHA256SUMS                                  the sums of every file above (image/ file by file)
#
# _out/release/latest points at the newest; hack/node.sh pushes it to the node's registry and the
# node pulls it from there by digest. Included by the root Makefile after hack/node.mk.

RELEASE_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

# The platforms of the image and of the kubectl plugin. make test makes and checks a release for
# this machine's platform alone (the Makefile's test: RELEASE_PLATFORMS): the others' builds are
# most of a release's time on a fresh machine and differ only in GOOS and GOARCH; make release and
# make release-test make them all, as a release must (docs/releasing.md).
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
KUBECTL_RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_DIR        = _out/release/$(VERSION)
# Where the image is pushed, and what the rendered manifests name: by default the node's own
# registry (hack/node.sh, hack/NODE.md). Set it to your registry's repository.
IMAGE_REPO ?= 10.244.0.1:5000/kubetree/coredns
# dnsq's image: beside IMAGE_REPO, named dnsq.
DNSQ_IMAGE_REPO ?= $(patsubst %/,%,$(dir $(IMAGE_REPO)))/dnsq
RELEASE_LABELS = -label org.opencontainers.image.version=$(VERSION) -label org.opencontainers.image.revision=$(REVISION) \
	-label org.opencontainers.image.licenses=Apache-2.0

RELEASE_TOOL_DIR := $(CP_TOOLS_DIR)/cmd/release
$(CP_BIN_DIR)/release: $(filter-out %_test.go,$(wildcard $(RELEASE_TOOL_DIR)/*.go)) $(RELEASE_TOOL_DIR)/go.mod $(RELEASE_TOOL_DIR)/go.sum
	@mkdir -p $(CP_BIN_DIR)
	cd $(RELEASE_TOOL_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' -o $(CURDIR)/$@ .

# The CNCF Distribution registry (v3.1.x), built from source as the control plane is, with the
# filesystem storage driver only (hack/tools/registry/main.go).
REGISTRY_DIR := $(CP_TOOLS_DIR)/registry
$(CP_BIN_DIR)/registry: $(REGISTRY_DIR)/main.go $(REGISTRY_DIR)/go.mod $(REGISTRY_DIR)/go.sum
	@mkdir -p $(CP_BIN_DIR)
	cd $(REGISTRY_DIR) && $(CP_GOENV) $(CP_GO) build $(CP_GOFLAGS) -ldflags='$(CP_LDFLAGS)' \
		-o $(CURDIR)/$@ .

.PHONY: release release-test

## release: VERSION=vX.Y.Z [IMAGE_REPO=host/repo]: multi-arch image (OCI index), SBOMs, SHA256SUMS, deploy/ pinned by digest, in _out/release/VERSION
release: $(CP_BIN_DIR)/mkimage $(CP_BIN_DIR)/release
	@[[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$ ]] || \
		{ echo "release: VERSION=$(VERSION) is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE] (an image tag takes no +BUILD)"; exit 1; }
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)/oci
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; bin=$(RELEASE_DIR)/coredns-$$os-$$arch; \
		echo "release: $$bin"; \
		(cd cmd/coredns && CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
			-ldflags='-s -w $(STAMP)' -o $(CURDIR)/$$bin .); \
		$(CP_BIN_DIR)/release sbom -version $(VERSION) -o $$bin.cdx.json $$bin; \
		$(CP_BIN_DIR)/mkimage -oci $(RELEASE_DIR)/oci/$$os-$$arch -tag $(IMAGE_REPO):$(VERSION) -platform $$p \
			$(RELEASE_LABELS) -user 65532:65532 -file $$bin:/coredns:0755:cap_net_bind_service -entrypoint /coredns \
			-expose 53/tcp,53/udp,9153/tcp; \
		bin=$(RELEASE_DIR)/dnsq-$$os-$$arch; \
		echo "release: $$bin"; \
		(cd $(CP_TOOLS_DIR) && $(CP_GOENV) GOOS=$$os GOARCH=$$arch $(CP_GO) build $(CP_GOFLAGS) -buildvcs=false \
			-ldflags='$(CP_LDFLAGS)' -o $(CURDIR)/$$bin ./cmd/dnsq); \
		$(CP_BIN_DIR)/release sbom -version $(VERSION) -o $$bin.cdx.json $$bin; \
		$(CP_BIN_DIR)/mkimage -oci $(RELEASE_DIR)/oci/dnsq-$$os-$$arch -tag $(DNSQ_IMAGE_REPO):$(VERSION) -platform $$p \
			$(RELEASE_LABELS) -user 65532:65532 -file $$bin:/dnsq -entrypoint /dnsq; \
	done
	$(CP_BIN_DIR)/release index -o $(RELEASE_DIR)/image -name $(IMAGE_REPO):$(VERSION) -version $(VERSION) -revision $(REVISION) \
		$(foreach p,$(RELEASE_PLATFORMS),$(RELEASE_DIR)/oci/$(subst /,-,$(p))) > $(RELEASE_DIR)/image.digest
	@echo "$(IMAGE_REPO)@$$(cat $(RELEASE_DIR)/image.digest)" > $(RELEASE_DIR)/image.ref && rm $(RELEASE_DIR)/image.digest
	$(CP_BIN_DIR)/release index -o $(RELEASE_DIR)/dnsq-image -name $(DNSQ_IMAGE_REPO):$(VERSION) -version $(VERSION) -revision $(REVISION) \
		$(foreach p,$(RELEASE_PLATFORMS),$(RELEASE_DIR)/oci/dnsq-$(subst /,-,$(p))) > $(RELEASE_DIR)/dnsq.digest
	@echo "$(DNSQ_IMAGE_REPO)@$$(cat $(RELEASE_DIR)/dnsq.digest)" > $(RELEASE_DIR)/dnsq.ref && rm $(RELEASE_DIR)/dnsq.digest
	@echo $(VERSION) > $(RELEASE_DIR)/VERSION
	$(CP_BIN_DIR)/release render -image $$(cat $(RELEASE_DIR)/image.ref) -tag $(VERSION) -o $(RELEASE_DIR)/deploy deploy
	@rm -rf $(RELEASE_DIR)/oci
	KUBECTL_DNSQ_IMAGE=$$(cat $(RELEASE_DIR)/dnsq.ref) KUBECTL_RELEASE_PLATFORMS="$(KUBECTL_RELEASE_PLATFORMS)" hack/kubectl-release.sh $(RELEASE_DIR)/kubectl $(VERSION) >/dev/null
	@cd $(RELEASE_DIR) && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	@ln -sfn $(VERSION) _out/release/latest
	@echo "release: $(RELEASE_DIR) — $$(cat $(RELEASE_DIR)/image.ref)"

## release-test: make release, then TestRelease checks it (platforms, ELF machines, SBOMs against go version -m, pinned manifests, sums)
release-test: release
	cd $(RELEASE_TOOL_DIR) && $(CP_GOENV) KUBETREE_RELEASE=$(CURDIR)/$(RELEASE_DIR) KUBETREE_RELEASE_PLATFORMS="$(RELEASE_PLATFORMS)" \
		KUBETREE_KUBECTL_PLATFORMS="$(KUBECTL_RELEASE_PLATFORMS)" $(CP_GO) test -count=1 ./...

.DEFAULT_GOAL := $(RELEASE_SAVED_DEFAULT_GOAL)
