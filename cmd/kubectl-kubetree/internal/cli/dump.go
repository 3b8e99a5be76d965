package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/ask"
	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/replica"
	"github.com/kubetree/kubetree/internal/explainapi"
)

type dumpOptions struct {
	*options
	name, replica, output string
	pageSize              int
}

func newDumpCommand(o *options) *cobra.Command {
	d := &dumpOptions{options: o}
	cmd := &cobra.Command{
		Use:   "dump [-n NAMESPACE] [--name GLOB]",
		Short: "List the names a kubetree replica holds: name, types, records, source objects",
		Long: "dump pages through a kubetree replica's /dump (port-forwarded through the API server) and prints every name, " +
			"or those of -n NAMESPACE, or those matching --name GLOB; -o json prints JSON lines, as /dump gives them.",
		Example: "  kubectl kubetree dump -n shop\n  kubectl kubetree dump --name '*.kube-system.svc.*' -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns := ""
			if cmd.Flags().Changed("namespace") {
				ns = *d.config.Namespace
			}
			return d.run(cmd.Context(), ns)
		},
	}
	cmd.Flags().StringVar(&d.name, "name", "", "only names matching this glob (path.Match, on the name without its final dot)")
	cmd.Flags().StringVar(&d.replica, "replica", "", "the DNS pod to ask (the first by name when not given)")
	cmd.Flags().IntVar(&d.pageSize, "page-size", explainapi.DefaultDumpLimit, fmt.Sprintf("names asked a page (1 to %d)", explainapi.MaxDumpLimit))
	cmd.Flags().StringVarP(&d.output, "output", "o", "", "json (JSON lines) or yaml (a table without)")
	return cmd
}

func (d *dumpOptions) run(ctx context.Context, ns string) error {
	if err := checkFormat(d.output); err != nil {
		return err
	}
	if _, err := path.Match(d.name, ""); err != nil {
		return fmt.Errorf("--name %q: %w", d.name, err)
	}
	if d.pageSize < 1 || d.pageSize > explainapi.MaxDumpLimit {
		return fmt.Errorf("--page-size %d: want 1 to %d", d.pageSize, explainapi.MaxDumpLimit)
	}
	rs, done, err := d.replicas(ctx, d.replica, replica.NamesPermission("list", ns))
	if err != nil {
		return err
	}
	defer done()
	keep := filter(ns, d.name)
	enc := json.NewEncoder(d.streams.Out)
	var rows [][]any
	var all []explainapi.DumpedName
	err = ask.Dump(ctx, http.DefaultClient, rs[0], d.pageSize, func(n explainapi.DumpedName) error {
		switch {
		case !keep(n.Name):
		case d.output == formatJSON:
			return enc.Encode(n)
		case d.output == formatYAML:
			all = append(all, n)
		default:
			rows = append(rows, dumpRow(n))
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch d.output {
	case formatJSON:
		return nil
	case formatYAML:
		return printData(d.streams.Out, formatYAML, all)
	}
	if len(rows) == 0 {
		fmt.Fprintf(d.streams.ErrOut, "No names in %s's dump match.\n", rs[0].Pod)
		return nil
	}
	return printTable(d.streams.Out, []string{"name", "types", "records", "source"}, rows)
}

func dumpRow(n explainapi.DumpedName) []any {
	records := fmt.Sprint(n.Records)
	if n.Truncated {
		records += " (truncated)"
	}
	var from []string
	for _, o := range n.From {
		from = append(from, fmt.Sprintf("%s %s@%s", o.Kind, o.Name, o.ResourceVersion))
	}
	return []any{n.Name, orDash(strings.Join(n.Types, ",")), records, orDash(strings.Join(from, ", "))}
}

// filter keeps the names of namespace ns ("": any) that match glob ("": any).
func filter(ns, glob string) func(string) bool {
	return func(name string) bool {
		if ns != "" && namespaceOf(name) != ns {
			return false
		}
		if glob == "" {
			return true
		}
		ok, _ := path.Match(glob, strings.TrimSuffix(name, "."))
		return ok
	}
}

// namespaceOf is the namespace of a cluster name: the label before its last "svc" or "pod" label
// (<service>.<ns>.svc.<zone>, <address>.<ns>.pod.<zone>); "" for the zone's own names.
func namespaceOf(name string) string {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	for i := len(labels) - 1; i > 0; i-- {
		if labels[i] == "svc" || labels[i] == "pod" {
			return labels[i-1]
		}
	}
	return ""
}
