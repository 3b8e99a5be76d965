package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestAnswersThroughShutdown: from SIGTERM until CoreDNS exits (health's lameduck, then
// kubetree's drain) a replica still answers for the cluster, as clients whose packets still
// reach it need: a name that does not exist is NXDOMAIN, never the SERVFAIL of an instance that is
// not synced (with its watch stopped at SIGTERM, every absent name failed so, and every
// lookup through a search path with it), and a Service made meanwhile is answered. The in-tree
// plugin, under the same Corefile, is reported beside it.
func TestAnswersThroughShutdown(t *testing.T) {
	ns := newNamespace(t, "shutdown")
	before := createService(t, k8stest.ClusterIPService(ns, "before", nil, k8stest.TCP("http", 80)))
	for _, directive := range []string{"kubetree", "kubernetes"} {
		t.Run(directive, func(t *testing.T) {
			health := freePorts(t, 1)[0]
			c := startCoreDNSPlugin(t, directive, []string{readyContinuously, "health " + health + " {\n        lameduck 10s\n    }"})
			c.waitAnswer(t, svcName(ns, "before"), dns.TypeA, before.Spec.ClusterIP)
			eventually(t, "ready", 30*time.Second, c.isReady)
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled := time.Now()
			// Not ready: the shutdown callbacks have begun (the ready plugin's run before the DNS plugin's).
			eventually(t, "not ready after SIGTERM", 10*time.Second, func() bool { return !c.isReady() })
			absent := c.query(t, "udp", svcName(ns, "absent-"+directive), dns.TypeA)
			existing := c.query(t, "tcp", svcName(ns, "before"), dns.TypeA)
			made := createService(t, k8stest.ClusterIPService(ns, "made-"+directive, nil, k8stest.TCP("http", 80)))
			var madeAnswer string
			for madeAnswer == "" {
				select {
				case <-c.done:
					madeAnswer = "not answered before the exit"
				case <-time.After(100 * time.Millisecond):
					if m, err := c.try("udp", svcName(ns, made.Name), dns.TypeA); err == nil && m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0 {
						madeAnswer = fmt.Sprintf("answered %s", answers(m)[0])
					}
				}
			}
			select {
			case <-c.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("CoreDNS still runs 60 s after SIGTERM (lameduck 10s)")
			}
			report(t, "%s, from SIGTERM to its exit %.1f s later: an absent name %s, an existing one %s %v, a Service made meanwhile %s",
				directive, time.Since(signalled).Seconds(), dns.RcodeToString[absent.Rcode], dns.RcodeToString[existing.Rcode], answers(existing), madeAnswer)
			if directive != "kubetree" {
				return
			}
			if absent.Rcode != dns.RcodeNameError {
				t.Errorf("an absent name while shutting down: %s, want NXDOMAIN\n%v", dns.RcodeToString[absent.Rcode], absent)
			}
			if existing.Rcode != dns.RcodeSuccess || len(existing.Answer) != 1 {
				t.Errorf("an existing Service while shutting down: %v, want its address %s", existing, before.Spec.ClusterIP)
			}
			if madeAnswer != "answered "+made.Spec.ClusterIP {
				t.Errorf("a Service made while shutting down: %s, want it answered %s", madeAnswer, made.Spec.ClusterIP)
			}
		})
	}
}
