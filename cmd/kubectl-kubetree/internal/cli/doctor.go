package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/doctor"
	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/replica"
)

type doctorOptions struct {
	*options
	opts   doctor.Options
	output string
}

// dnsqImage is doctor's default --image: a release stamps its own dnsq image by digest
// (hack/release.mk, hack/kubectl-release.sh); a build of our own names the node's.
var dnsqImage = "kubetree/dnsq:1"

func newDoctorCommand(o *options) *cobra.Command {
	d := &doctorOptions{options: o}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the cluster's DNS, whatever serves it, against the Kubernetes DNS specification",
		Long: "doctor makes a namespace of fixtures (a ClusterIP service with named ports, dual-stack where the cluster has it; " +
			"a headless service with a pod of hostname and subdomain; an ExternalName) and a client pod with the cluster's DNS policy, " +
			"asks every record form of the specification through the pod's own resolver, checks its resolv.conf against what the kubelet " +
			"should write, prints each check with the section it comes from, and deletes the namespace. It exits 0 only when every check passes.",
		Example: "  kubectl kubetree doctor\n  kubectl kubetree doctor -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return d.run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&d.opts.Domain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	f.StringVar(&d.opts.Image, "image", dnsqImage, "the image of the fixtures' pods and of the client pod: it must hold /dnsq (the release's dnsq image, or a copy of it in your registry)")
	f.StringVar(&d.opts.NodeLocal, "nodelocal-address", "169.254.20.10", "NodeLocal DNSCache's address, the pods' nameserver when kube-system runs node-local-dns")
	f.DurationVar(&d.opts.Converge, "wait", time.Minute, "how long a check is asked again before it fails (the DNS learns of new objects through its watch)")
	f.DurationVar(&d.opts.PodTimeout, "pod-timeout", 2*time.Minute, "how long the fixtures' pods may take to run")
	f.StringVar(&d.opts.Node, "node", "", "the node whose pods' DNS to check: the client pods run there (default: wherever the scheduler puts them)")
	f.StringVarP(&d.output, "output", "o", "", "json or yaml (a table without)")
	return cmd
}

func (d *doctorOptions) run(ctx context.Context) error {
	if err := checkFormat(d.output); err != nil {
		return err
	}
	svc, err := replica.ParseService(d.dnsService)
	if err != nil {
		return err
	}
	d.opts.DNS = svc
	cfg, c, err := d.clients()
	if err != nil {
		return err
	}
	r, err := doctor.Run(ctx, cfg, c, d.opts)
	if err != nil {
		if r != nil && r.Namespace != "" {
			return fmt.Errorf("%w (namespace %s deleted)", err, r.Namespace)
		}
		return err
	}
	if d.output != "" {
		if err := printData(d.streams.Out, d.output, r); err != nil {
			return err
		}
	} else if err := d.print(r); err != nil {
		return err
	}
	if !r.Pass {
		return fmt.Errorf("%d of %d checks of %s's DNS failed", failures(r), len(r.Checks), r.DNS)
	}
	return nil
}

func (d *doctorOptions) print(r *doctor.Report) error {
	w := d.streams.Out
	var rows [][]any
	for _, c := range r.Checks {
		status := "PASS"
		switch {
		case c.Info:
			status = "INFO"
		case !c.Pass:
			status = "FAIL"
		}
		rows = append(rows, []any{status, c.Section, c.Name, orDash(c.Query), c.Detail})
	}
	if err := printTable(w, []string{"status", "section", "check", "query", "detail"}, rows); err != nil {
		return err
	}
	summary := colored(w, fmt.Sprintf("every check of %s's DNS passed", r.DNS), green)
	if !r.Pass {
		summary = colored(w, fmt.Sprintf("%d of %d checks of %s's DNS failed", failures(r), len(r.Checks), r.DNS), red)
	}
	_, err := fmt.Fprintf(w, "\n%s; namespace %s deleted\n", summary, r.Namespace)
	return err
}

func failures(r *doctor.Report) int {
	n := 0
	for _, c := range r.Checks {
		if !c.Pass && !c.Info {
			n++
		}
	}
	return n
}
