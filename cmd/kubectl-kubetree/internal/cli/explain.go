package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/ask"
	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/replica"
	"github.com/kubetree/kubetree/internal/explainapi"
)

type explainOptions struct {
	*options
	from, client, replica, output string
	all                           bool
}

func newExplainCommand(o *options) *cobra.Command {
	e := &explainOptions{options: o}
	cmd := &cobra.Command{
		Use:   "explain NAME [TYPE]",
		Short: "Explain a name's answer from the DNS pods: the answer, why, and the objects it comes from",
		Long: "explain asks each kubetree replica (port-forwarded through the API server) what it answers NAME, " +
			"as a client (--from pod/NAME, --client IP) gets it, why, and from which objects at which resourceVersions. " +
			"Replicas that disagree are named; --all prints every replica's answer.",
		Example: "  kubectl kubetree explain web.shop.svc.cluster.local\n" +
			"  kubectl kubetree explain _http._tcp.web.shop.svc.cluster.local SRV --from pod/client -n shop\n" +
			"  kubectl kubetree explain web.shop.svc.cluster.local --all -o yaml",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := ask.Query{Name: args[0]}
			if len(args) == 2 {
				q.Type = args[1]
			}
			return e.run(cmd.Context(), q)
		},
	}
	cmd.Flags().StringVar(&e.from, "from", "", "explain the answer pod/NAME (of -n) gets: its address, as kubetree identifies clients")
	cmd.Flags().StringVar(&e.client, "client", "", "explain the answer a client of this IP address gets")
	cmd.Flags().StringVar(&e.replica, "replica", "", "ask only this DNS pod")
	cmd.Flags().BoolVar(&e.all, "all", false, "print every replica's answer, not only the one they agree on")
	cmd.Flags().StringVarP(&e.output, "output", "o", "", "json or yaml (a table without)")
	cmd.MarkFlagsMutuallyExclusive("from", "client")
	cmd.MarkFlagsMutuallyExclusive("replica", "all")
	return cmd
}

// explainResult is what -o json|yaml prints: every replica's explanation, and where they disagree.
type explainResult struct {
	Replicas      []replicaAnswer `json:"replicas"`
	Disagreements []string        `json:"disagreements,omitempty"`
}

type replicaAnswer struct {
	Pod         string                  `json:"pod"`
	Explanation *explainapi.Explanation `json:"explanation,omitempty"`
	Error       string                  `json:"error,omitempty"`
}

// errOutsideZones is returned for a name no replica serves.
var errOutsideZones = errors.New("outside every zone")

func (e *explainOptions) run(ctx context.Context, q ask.Query) error {
	if err := checkFormat(e.output); err != nil {
		return err
	}
	if err := q.Check(); err != nil {
		return err
	}
	client, ns, err := e.clientAddress(ctx)
	if err != nil {
		return err
	}
	q.Client = client
	rs, done, err := e.replicas(ctx, e.replica, readsOf(q.Name, ns)...)
	if err != nil {
		return err
	}
	defer done()
	var answers []ask.Answer
	for _, r := range rs {
		x, err := ask.Explain(ctx, http.DefaultClient, r, q)
		answers = append(answers, ask.Answer{Pod: r.Pod, X: x, Err: err})
	}
	res := explainResult{Disagreements: ask.Disagreements(answers)}
	var failed []error
	outside, why := true, ""
	for _, a := range answers {
		r := replicaAnswer{Pod: a.Pod, Explanation: a.X}
		if a.Err != nil {
			r.Error, failed = a.Err.Error(), append(failed, a.Err)
		}
		if a.X == nil || a.X.Reason != explainapi.ReasonOutsideZones {
			outside = false
		} else {
			why = a.X.Why
		}
		res.Replicas = append(res.Replicas, r)
	}
	if len(failed) == len(answers) {
		return errors.Join(failed...)
	}
	if outside {
		return fmt.Errorf("%w: %s", errOutsideZones, why)
	}
	if e.output != "" {
		return printData(e.streams.Out, e.output, res)
	}
	return e.print(res)
}

// readsOf is what explaining name as a client of namespace ns ("": no pod) takes: get of the
// names of ns and of the name's namespace (<...>.<ns>.svc|pod.<zone>), or cluster-wide when the
// explanation belongs to no namespace, as kubetree asks of a caller off loopback.
func readsOf(name, ns string) []replica.Permission {
	var reads []replica.Permission
	if ns != "" {
		reads = append(reads, replica.NamesPermission("get", ns))
	}
	labels := strings.Split(strings.ToLower(strings.TrimSuffix(name, ".")), ".")
	for i := len(labels) - 1; i >= 1; i-- {
		if labels[i] == "svc" || labels[i] == "pod" {
			if labels[i-1] != ns {
				reads = append(reads, replica.NamesPermission("get", labels[i-1]))
			}
			break
		}
	}
	if len(reads) == 0 {
		reads = append(reads, replica.NamesPermission("get", ""))
	}
	return reads
}

// clientAddress is the address --from or --client names ("" for none), and the namespace whose
// names the explanation tells of: --from's, else "" (every namespace: an address may be any
// namespace's pod).
func (e *explainOptions) clientAddress(ctx context.Context) (string, string, error) {
	if e.client != "" {
		a, err := netip.ParseAddr(e.client)
		if err != nil {
			return "", "", fmt.Errorf("--client %q is not an IP address", e.client)
		}
		return a.String(), "", nil
	}
	if e.from == "" {
		return "", "", nil
	}
	kind, name, ok := strings.Cut(e.from, "/")
	if !ok {
		kind, name = "pod", e.from
	}
	if kind != "pod" && kind != "pods" && kind != "po" {
		return "", "", fmt.Errorf("--from %s: want pod/NAME", e.from)
	}
	ns, _, err := e.namespace()
	if err != nil {
		return "", "", err
	}
	_, c, err := e.clients()
	if err != nil {
		return "", "", err
	}
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, meta.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", "", fmt.Errorf("--from: pod %s not found in namespace %s", name, ns)
	case err != nil:
		return "", "", fmt.Errorf("--from: reading pod %s/%s: %w", ns, name, err)
	case p.Status.PodIP == "":
		return "", "", fmt.Errorf("--from: pod %s/%s has no address yet (%s)", ns, name, p.Status.Phase)
	}
	return p.Status.PodIP, ns, nil
}

// print prints the explanation the replicas agree on (or every replica's, with --all or when they
// disagree), its source objects, and the disagreements.
func (e *explainOptions) print(res explainResult) error {
	w := e.streams.Out
	var rows [][]any
	for _, r := range res.Replicas {
		if r.Explanation == nil {
			rows = append(rows, []any{r.Pod, "-", "-", "-", r.Error})
			continue
		}
		x := r.Explanation
		rows = append(rows, []any{r.Pod, x.Name + " " + x.Type, orDash(x.Rcode), orDash(strings.Join(ask.RecordData(x.Answer), ", ")), x.Reason})
	}
	if !e.all && len(res.Disagreements) == 0 {
		rows = rows[:1]
		rows[0][0] = fmt.Sprintf("%d agree", len(res.Replicas))
		if len(res.Replicas) == 1 {
			rows[0][0] = res.Replicas[0].Pod
		}
	}
	if err := printTable(w, []string{"replica", "query", "rcode", "answer", "reason"}, rows); err != nil {
		return err
	}
	pod, x := first(res)
	of := "" // whose explanation follows, when the table shows several
	if len(rows) > 1 {
		of = " (" + pod + ")"
	}
	fmt.Fprintf(w, "\nWhy%s: %s\n", of, x.Why)
	if x.Client.Address != explainapi.DefaultClient.String() || x.Client.Pod != "" {
		fmt.Fprintf(w, "Client: %s %s\n", x.Client.Address, x.Client.Pod)
	}
	if len(x.From) > 0 {
		fmt.Fprintln(w)
		var from [][]any
		for _, o := range x.From {
			from = append(from, []any{o.Kind, orDash(o.Namespace), o.Name, orDash(o.ResourceVersion)})
		}
		if err := printTable(w, []string{"kind", "namespace", "name", "resourceVersion"}, from); err != nil {
			return err
		}
	}
	for _, p := range x.Problems {
		fmt.Fprintf(w, "Problem: %s (version %s): %s\n", p.Object, p.ResourceVersion, p.Text)
	}
	for _, d := range res.Disagreements {
		fmt.Fprintf(w, "\n%s %s\n", colored(w, "Replicas disagree:", red), d)
	}
	return nil
}

// first is the first replica that explained, and its explanation (there is one: run returns
// when none did).
func first(res explainResult) (string, *explainapi.Explanation) {
	for _, r := range res.Replicas {
		if r.Explanation != nil {
			return r.Pod, r.Explanation
		}
	}
	return "", &explainapi.Explanation{}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
