package steady

import (
	"context"
	"fmt"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// steadyCorefile is a server's Corefile: the plugin line alone, kubetree with its audit off.
func steadyCorefile(plugin, kubeconfig string) func(addr, ready, metrics string) string {
	return func(addr, ready, metrics string) string {
		opts := "kubeconfig " + kubeconfig
		if plugin == "kubetree" {
			opts += "\n        audit_interval 0"
		}
		return fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    ready %s\n    %s cluster.local in-addr.arpa ip6.arpa {\n        %s\n    }\n}\n",
			measure.Port(addr), metrics, ready, plugin, opts)
	}
}

// steadyWindowOf starts sv (unless it is no server), waits until it answers and -steady-settle
// more, and measures one window.
func steadyWindowOf(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, target string, pids map[string]int,
	probe measure.Probe, ch *apicost.Churn, sv Server, round int) (apicost.Window, error) {
	w := apicost.Window{Round: round}
	var servers []*measure.Server
	var proxies []*measure.CountingProxy
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
		for _, p := range proxies {
			p.Close()
		}
	}()
	if sv.name != "" {
		measure.ServerBinary[sv.name] = sv.binary
		w.Replicas = cfg.Replicas
		for i := range w.Replicas {
			trial := round*w.Replicas + i
			p, kc, err := measure.Proxied(dir, fmt.Sprintf("%s-%d", sv.name, trial), cp.Kubeconfig, target)
			if err != nil {
				return w, err
			}
			proxies = append(proxies, p)
			s, err := measure.StartServerConf(ctx, dir, sv.name, trial, steadyCorefile(sv.plugin, kc))
			if err != nil {
				return w, err
			}
			servers = append(servers, s)
		}
		for _, s := range servers {
			st, err := s.WaitStartupWithin(ctx, probe.Name, probe.IP, 10*time.Minute)
			if err != nil {
				return w, err
			}
			w.Answer = max(w.Answer, st.Answer.Seconds())
		}
	}
	if err := measure.Sleep(ctx, cfg.Settle); err != nil {
		return w, err
	}
	watchers := func() (cpu, down, up float64, err error) {
		for i, s := range servers {
			c, err := s.CPU()
			if err != nil {
				return 0, 0, 0, err
			}
			cpu += c
			down += float64(proxies[i].Down.Load())
			up += float64(proxies[i].Up.Load())
		}
		return cpu, down, up, nil
	}
	if err := apicost.MeasureWindow(ctx, cfg.Window, cp, pids, ch, &w, watchers, fmt.Sprintf("round %d, %s", round+1, serverLabel(sv.name))); err != nil {
		return w, err
	}
	for _, s := range servers {
		if e := s.Exited(); e != "" {
			return w, fmt.Errorf("exited during the window: %s", e)
		}
	}
	return w, nil
}

// serverLabel is a server's name in the log and the report.
func serverLabel(name string) string {
	switch name {
	case "":
		return "no server"
	case "kubernetes":
		return "kubernetes (in-tree)"
	}
	return name
}
