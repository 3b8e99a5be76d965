package measure

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Spec is the synthetic cluster an experiment creates (Populate).
type Spec struct {
	Services         int     // -services
	Namespaces       int     // -namespaces: they are spread over
	Endpoints        int     // -endpoints: ready endpoints a service, one EndpointSlice
	Headless         float64 // -headless: the share of the services that are headless
	Workers          int     // -workers: concurrent API clients creating it
	ControllerSlices bool    // -controller-slices: EndpointSlices as the EndpointSlice controller writes them
}

// Common is what every experiment is given: the cluster it creates, the repository, where its
// report goes.
type Common struct {
	Spec

	Root string // -root: the kubetree repository (bin/coredns, bin/etcd, ..., hack/cluster.sh), absolute
	Out  string // -out: where the report goes (markdown); "": stdout only
	Keep bool   // -keep: keep the temporary directory (control plane state, Corefiles, logs)
}

// WithControlPlane runs f with a control plane of its own in a temporary directory (prefix names
// it), stopped and removed afterwards whatever f returns (-keep keeps the directory: hack/cluster.sh
// start DIR/cluster brings the same cluster back).
func (cfg Common) WithControlPlane(ctx context.Context, prefix string, f func(dir string, cp *ControlPlane) error) error {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return err
	}
	defer func() {
		if cfg.Keep {
			Logf("kept %s (control plane state, Corefiles, CoreDNS logs)", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	cp := &ControlPlane{Root: cfg.Root, Dir: filepath.Join(dir, "cluster")}
	defer func() {
		Logf("stopping the control plane")
		if err := cp.Stop(); err != nil {
			Logf("stopping the control plane: %v", err)
		}
	}()
	Logf("== control plane start")
	if err := cp.Start(ctx); err != nil {
		return err
	}
	return f(dir, cp)
}

// Publish prints a mode's report, and writes it to -out when one is given.
func (cfg Common) Publish(report string) error {
	fmt.Println(report)
	if cfg.Out == "" {
		return nil
	}
	if err := os.WriteFile(cfg.Out, []byte(report), 0o644); err != nil {
		return err
	}
	Logf("wrote %s", cfg.Out)
	return nil
}

// RunInfo is what a report says of the run: the machine, the API server's version, the synthetic
// cluster, and when the run began and ended.
type RunInfo struct {
	Machine      Machine
	Version      string // kube-apiserver's
	Cluster      *Cluster
	Began, Ended time.Time
}

// OnCluster runs f on a control plane of its own (WithControlPlane) once it holds the synthetic
// cluster, noting what run says of them, and then publishes the report that report writes.
func (cfg Common) OnCluster(ctx context.Context, prefix string, run *RunInfo, f func(dir string, cp *ControlPlane) error, report func() string) error {
	return cfg.WithControlPlane(ctx, prefix, func(dir string, cp *ControlPlane) error {
		run.Machine, run.Version = MachineInfo(cfg.Root), cp.Version
		Logf("== create the cluster")
		cl, err := Populate(ctx, cp, cfg.Spec, nil, nil)
		if err != nil {
			return err
		}
		run.Cluster = cl
		if err := f(dir, cp); err != nil {
			return err
		}
		run.Ended = time.Now()
		return cfg.Publish(report())
	})
}
