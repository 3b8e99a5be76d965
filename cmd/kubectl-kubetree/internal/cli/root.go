// Package cli is kubectl-kubetree's commands: kubectl's flags (cli-runtime's genericclioptions:
// --kubeconfig, --context, -n and the rest) and kubectl's output (cli-runtime's printers).
package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/ask"
	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/replica"
	"github.com/kubetree/kubetree/internal/explainapi"
)

// options are the flags every command shares.
type options struct {
	streams    genericiooptions.IOStreams
	config     *genericclioptions.ConfigFlags
	dnsService string
	port       int
	endpoints  []string // POD=URL
}

// NewCommand is `kubectl kubetree` and its commands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{streams: streams, config: genericclioptions.NewConfigFlags(true)}
	cmd := &cobra.Command{
		Use:   "kubectl-kubetree",
		Short: "Explain, dump and check the cluster's DNS",
		Long: "kubectl kubetree asks kubetree's explain endpoint in the DNS pods through the API server's port-forward " +
			"(explain, dump), and checks the cluster's DNS, whatever serves it, against the Kubernetes DNS specification (doctor).",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl kubetree"},
	}
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&o.dnsService, "dns-service", replica.DefaultService.String(), "the Service in front of the cluster DNS, NAMESPACE/NAME")
	cmd.PersistentFlags().IntVar(&o.port, "explain-port", defaultExplainPort(), "the port of kubetree's explain endpoint in the DNS pods (its explain option's address)")
	cmd.PersistentFlags().StringArrayVar(&o.endpoints, "endpoint", nil,
		"ask this explain endpoint, NAME=URL (such as a=http://127.0.0.1:9155), instead of port-forwarding to the DNS pods; repeat for each replica")
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.AddCommand(newExplainCommand(o), newDumpCommand(o), newDoctorCommand(o))
	return cmd
}

// defaultExplainPort is the port of the explain option's default address.
func defaultExplainPort() int {
	_, p, _ := net.SplitHostPort(explainapi.DefaultAddr)
	port, _ := strconv.Atoi(p)
	return port
}

// clients are the REST config and clientset the flags name.
func (o *options) clients() (*rest.Config, kubernetes.Interface, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	return cfg, c, err
}

// namespace is -n, or the kubeconfig context's namespace.
func (o *options) namespace() (string, bool, error) {
	return o.config.ToRawKubeConfigLoader().Namespace()
}

// replicas are the explain endpoints to ask: those --endpoint names, or a port-forward to each
// DNS pod (the one replicaName names, when given), opened after asking the API server whether the
// caller may. done closes the port-forwards.
func (o *options) replicas(ctx context.Context, replicaName string, reads ...replica.Permission) (_ []ask.Replica, done func(), _ error) {
	if len(o.endpoints) > 0 {
		return o.givenReplicas(replicaName)
	}
	svc, err := replica.ParseService(o.dnsService)
	if err != nil {
		return nil, nil, err
	}
	cfg, c, err := o.clients()
	if err != nil {
		return nil, nil, err
	}
	pods, err := replica.Pods(ctx, c, svc)
	if err != nil {
		return nil, nil, err
	}
	if pods, err = replica.Pick(pods, replicaName); err != nil {
		return nil, nil, err
	}
	// Through port-forward, kubetree serves whoever reaches it: what the caller reads is checked
	// here, as kubetree checks a caller off loopback (docs/operations.md).
	if err := replica.Need(ctx, c, append([]replica.Permission{replica.ForwardPermission(svc.Namespace)}, reads...)...); err != nil {
		return nil, nil, err
	}
	var fws []*replica.Forward
	var rs []ask.Replica
	for _, p := range pods {
		fw, err := replica.Open(cfg, c, p, o.port)
		if err != nil {
			closeAll(fws)
			return nil, nil, err
		}
		fws, rs = append(fws, fw), append(rs, ask.Replica{Pod: p.Name, URL: fw.URL})
	}
	return rs, func() { closeAll(fws) }, nil
}

// givenReplicas are the endpoints --endpoint names (the one replicaName names, when given).
func (o *options) givenReplicas(replicaName string) ([]ask.Replica, func(), error) {
	var rs []ask.Replica
	for _, e := range o.endpoints {
		name, u, ok := strings.Cut(e, "=")
		if !ok || name == "" || !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, nil, fmt.Errorf("--endpoint %q: want NAME=URL, such as a=http://127.0.0.1:9155", e)
		}
		if replicaName == "" || replicaName == name {
			rs = append(rs, ask.Replica{Pod: name, URL: strings.TrimSuffix(u, "/")})
		}
	}
	if len(rs) == 0 {
		return nil, nil, fmt.Errorf("--replica %s is none of the --endpoint names", replicaName)
	}
	return rs, func() {}, nil
}

func closeAll(fws []*replica.Forward) {
	for _, f := range fws {
		f.Close()
	}
}
