package pods

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// markdown is the report.
func (res *podResults) markdown(cfg Options, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Pods: kubetree beside the in-tree kubernetes plugin, both with `pods verified` and autopath\n\n")
	fmt.Fprintf(&b, "`make bench-pods` (`cd bench && go run . -pods %s`), %s, in %s.\n\n", joinInts(cfg.Pods), time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	b.WriteString(res.machine.Header() + "\n")
	fmt.Fprintf(&b, "Pods are created running, with one address each, in %d namespaces; every 200th pod shares its labels (one Deployment's).\n", res.namespace)
	fmt.Fprintf(&b, "Memory is the growth over the same server with no pods (median of 5 samples).\n\n")
	fmt.Fprintf(&b, "| what | kubernetes | kubetree | kubetree/kubernetes |\n| --- | ---: | ---: | ---: |\n")
	for _, st := range res.steps {
		k8s := st.mem["kubernetes"].RSS - res.base["kubernetes"].RSS
		kt := st.mem["kubetree"].RSS - res.base["kubetree"].RSS
		fmt.Fprintf(&b, "| RSS growth at %d pods | %s | %s | %.2f |\n", st.pods, measure.MiB(k8s), measure.MiB(kt), kt/k8s)
		fmt.Fprintf(&b, "| RSS per pod at %d pods | %.0f B | %.0f B | %.2f |\n", st.pods, k8s/float64(st.pods), kt/float64(st.pods), kt/k8s)
		hk8s := st.mem["kubernetes"].Heap - res.base["kubernetes"].Heap
		hkt := st.mem["kubetree"].Heap - res.base["kubetree"].Heap
		fmt.Fprintf(&b, "| Go heap per pod at %d pods | %.0f B | %.0f B | %.2f |\n", st.pods, hk8s/float64(st.pods), hkt/float64(st.pods), hkt/hk8s)
	}
	k8s, kt := res.churnCPU["kubernetes"], res.churnCPU["kubetree"]
	fmt.Fprintf(&b, "| CPU idle | %.1f ms/s | %.1f ms/s | %.2f |\n", res.idleCPU["kubernetes"]*1000, res.idleCPU["kubetree"]*1000,
		res.idleCPU["kubetree"]/res.idleCPU["kubernetes"])
	fmt.Fprintf(&b, "| CPU per pod status change, idle taken off (%d changes) | %.0f µs | %.0f µs | %.2f |\n", res.churn,
		k8s/float64(res.churn)*1e6, kt/float64(res.churn)*1e6, kt/k8s)
	bk8s, bkt := res.churnBytes["kubernetes"], res.churnBytes["kubetree"]
	fmt.Fprintf(&b, "| bytes from the API server per pod status change (TLS records included), idle taken off | %.0f B | %.0f B | %.2f |\n",
		bk8s/float64(res.churn), bkt/float64(res.churn), bkt/bk8s)
	a, t := res.autopath["kubernetes"], res.autopath["kubetree"]
	fmt.Fprintf(&b, "| autopath: QPS (best of %d rounds) | %.0f | %.0f | %.2f |\n", cfg.Rounds, a.QPS, t.QPS, t.QPS/a.QPS)
	fmt.Fprintf(&b, "| autopath: CPU s per 100k queries | %.3f | %.3f | %.2f |\n", a.CPUPer100k(), t.CPUPer100k(), t.CPUPer100k()/a.CPUPer100k())
	fmt.Fprintf(&b, "\nAutopath queries: `web.pods-N.pods-0.svc.cluster.local A` from the address of a pod in pods-0, which autopath answers with a CNAME to `web.pods-N.svc.cluster.local` and its A record; rcodes kubernetes %s, kubetree %s.\n",
		measure.RcodeString(a.Rcodes), measure.RcodeString(t.Rcodes))
	return b.String()
}

// joinInts is v, comma-separated.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
