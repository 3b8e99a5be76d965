// Command pause is the sandbox ("pause") container of the local node: it holds the pod's
// namespaces and exits on SIGINT or SIGTERM. Built here (CGO_ENABLED=0, static) so that
// no image is pulled; as PID 1 of a sandbox it also reaps orphans reparented to it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As Kubernetes' pause does: `-v` prints a version and exits. kubeadm upgrade's preflight runs
	// a Job of the pause image with `-v` and waits for it to complete.
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "-V") {
		fmt.Println("pause (kubetree's, hack/tools/cmd/pause)")
		return
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
