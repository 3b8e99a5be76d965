# hack/compat.mk — `make compat`: the compatibility matrix (hack/compat.sh), included by the root Makefile.

.PHONY: compat compat-oldest

# VERSIONS (kube-apiserver) and COREDNS_VERSIONS override hack/compat.sh's lists, e.g.
# `make compat VERSIONS='v1.35.4 v1.36.3' COREDNS_VERSIONS=v1.15.0`.
COMPAT_ENV = $(if $(VERSIONS),VERSIONS='$(VERSIONS)') $(if $(COREDNS_VERSIONS),COREDNS_VERSIONS='$(COREDNS_VERSIONS)')

## compat: the e2e suite against each kube-apiserver of VERSIONS (each built once from source), the
## plugin.cfg build against each CoreDNS of COREDNS_VERSIONS; writes the table into docs/compatibility.md
compat: build control-plane
	$(COMPAT_ENV) hack/compat.sh all

## compat-oldest: the e2e suite against the oldest kube-apiserver of the window only (no table; fails as the suite does)
compat-oldest: build control-plane
	$(COMPAT_ENV) hack/compat.sh e2e $$($(COMPAT_ENV) hack/compat.sh oldest)
