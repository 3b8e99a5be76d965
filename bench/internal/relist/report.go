package relist

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// markdown is the report.
func (res *relistResult) markdown(cfg Options, took time.Duration) string {
	var b strings.Builder
	endpoints := len(res.cluster.Services) * cfg.Endpoints
	fmt.Fprintf(&b, "# A full relist: kubetree beside the in-tree kubernetes plugin\n\n")
	limit := ""
	if res.memoryLimit != "" {
		limit = " -memory-limit " + res.memoryLimit
	}
	if cfg.CPUHogs > 0 {
		limit += fmt.Sprintf(" -cpu-hogs %d", cfg.CPUHogs)
	}
	fmt.Fprintf(&b, "`cd bench && go run . -relist -services %d -endpoints %d -headless %.2f -gomemlimit %s%s`, %s, in %s.\n\n",
		cfg.Services, cfg.Endpoints, cfg.Headless, measure.OrDash(res.goMemLimit), limit, time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	b.WriteString(res.machine.Header() + "\n")
	fmt.Fprintf(&b, "%d services (%d headless), %d endpoints; both servers run with GOMEMLIMIT=%s. The API server is restarted; its new watch cache cannot resume the watches, so both list everything again while holding the old state.\n\n",
		len(res.cluster.Services), res.cluster.Headless, endpoints, measure.OrDash(res.goMemLimit))
	fmt.Fprintf(&b, "| what | kubernetes | kubetree | kubetree/kubernetes |\n| --- | ---: | ---: | ---: |\n")
	row := func(what string, k8s, kt float64, f func(float64) string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f |\n", what, f(k8s), f(kt), kt/k8s)
	}
	row("start → ready", res.startup["kubernetes"].Ready.Seconds(), res.startup["kubetree"].Ready.Seconds(), func(v float64) string { return fmt.Sprintf("%.2f s", v) })
	row("peak RSS (VmHWM) through start-up", res.startPeak["kubernetes"], res.startPeak["kubetree"], measure.MiB)
	row("peak anonymous RSS through start-up and 5 s after (RssAnon, sampled every 20 ms)", res.startAnon["kubernetes"], res.startAnon["kubetree"], measure.MiB)
	row("RSS, steady", res.steady["kubernetes"].RSS, res.steady["kubetree"].RSS, measure.MiB)
	row("Go heap, steady", res.steady["kubernetes"].Heap, res.steady["kubetree"].Heap, measure.MiB)
	row("peak RSS (VmHWM) through the relist", res.relistPeak["kubernetes"], res.relistPeak["kubetree"], measure.MiB)
	row("peak anonymous RSS through the relist (RssAnon, sampled every 20 ms)", res.anonPeak["kubernetes"], res.anonPeak["kubetree"], measure.MiB)
	row("file-backed RSS after the relist (RssFile: the binary's pages)", res.fileRSS["kubernetes"], res.fileRSS["kubetree"], measure.MiB)
	fs := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	row("CPU from exec to 5 s after ready", res.startCPU["kubernetes"], res.startCPU["kubetree"], fs)
	row("bytes from the API server, exec to 5 s after ready (TLS records included)", res.startBytes["kubernetes"], res.startBytes["kubetree"], measure.MiB)
	row("CPU from the restart to 5 s after the new service answered", res.relistCPU["kubernetes"], res.relistCPU["kubetree"], fs)
	row("bytes from the API server through the relist", res.relistBytes["kubernetes"], res.relistBytes["kubetree"], measure.MiB)
	row("restart → a new service answered", res.relistTook["kubernetes"].Seconds(), res.relistTook["kubetree"].Seconds(), func(v float64) string { return fmt.Sprintf("%.1f s", v) })
	for _, p := range []string{"kubernetes", "kubetree"} {
		pr := res.probes[p]
		fmt.Fprintf(&b, "\n%s: queries for existing names during the relist: %d right, %d wrong, %d unanswered.", p, pr.answered.Load(), pr.wrong.Load(), pr.failed.Load())
	}
	if c := res.cgroup; c != nil {
		fmt.Fprintf(&b, "\n\nkubetree ran in a memory cgroup limited to %s, as deploy/'s container (the in-tree plugin did not: it needs several times that): "+
			"the cgroup's peak usage %s, the limit reached %d times (each time the kernel reclaimed page cache), %d OOM kills; kubetree still running at the end: %v.",
			res.memoryLimit, measure.MiB(c.Peak), c.LimitHits, c.OOMKills, res.survived)
	}
	fmt.Fprintf(&b, "\n\nLoad average at the end: %s (2 CPUs; %d busy loops of bench itself beside the servers, -cpu-hogs).", measure.Loadavg(), cfg.CPUHogs)
	fmt.Fprintf(&b, "\n\nThe API server took %s to restart. Peak RSS is VmHWM, reset (clear_refs 5) after start-up. VmHWM counts the binary's file-backed pages, which both servers share through the page cache and the kernel reclaims under a cgroup's limit; RssAnon is what it cannot.\n", res.restartTook.Round(time.Millisecond))
	return b.String()
}
