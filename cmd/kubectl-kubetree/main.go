// Command kubectl-kubetree is the kubectl plugin of kubetree (kubectl kubetree explain, dump,
// doctor): docs/kubectl-plugin.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/cli"
)

func main() {
	// client-go's port-forward logs each refused connection through klog; the command says
	// what went wrong itself.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1)
	}
}
