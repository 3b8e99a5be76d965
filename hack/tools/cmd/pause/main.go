// Command pause is the sandbox ("pause") container of the local node: it holds the pod's
// namespaces and exits on SIGINT or SIGTERM. Built here (CGO_ENABLED=0, static) so that
// no image is pulled; as PID 1 of a sandbox it also reaps orphans reparented to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
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
