package measure

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
)

// Machine is the machine a run ran on, and the versions of what ran, for the reports.
type Machine struct {
	Nproc                                            int
	CPU, Memory, Kernel, LoadStart                   string
	Coredns, CoreDNSGo, Dnsperf, ClientGo, GoVersion string
	Source                                           string // the kubetree commit bin/coredns was built from
}

// sourceState is the repository's commit and the uncommitted files that go into bin/coredns (the
// plugin's non-test Go files, go.mod/go.sum, cmd/coredns): make bench builds from the working tree.
func sourceState(root string) string {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%h %s").Output()
	if err != nil {
		return "unknown (no git)"
	}
	subject := strings.TrimSpace(string(out))
	if len(subject) > 90 {
		subject = subject[:90] + "…"
	}
	src := "commit " + subject
	st, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".", ":!bench", ":!test", ":!hack", ":!deploy").Output()
	var dirty []string
	for _, l := range strings.Split(string(st), "\n") {
		if len(l) < 4 {
			continue
		}
		f := strings.TrimSpace(l[3:])
		if (strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") && !strings.Contains(f, "/")) ||
			f == "go.mod" || f == "go.sum" || strings.HasPrefix(f, "cmd/") {
			dirty = append(dirty, f)
		}
	}
	if len(dirty) > 0 {
		src += "; plus uncommitted changes in " + strings.Join(dirty, ", ")
	}
	return src
}

// MachineInfo is this machine, and the versions of what runs on it (root is the repository).
func MachineInfo(root string) Machine {
	m := Machine{Nproc: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb float64
				fmt.Sscan(v, &kb)
				m.Memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	m.Kernel = readTrim("/proc/sys/kernel/osrelease")
	m.Source = sourceState(root)
	m.LoadStart = Loadavg()
	if out, err := exec.Command(root+"/bin/coredns", "-version").Output(); err == nil {
		m.Coredns = strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ", ")
	}
	if bi, err := buildinfo.ReadFile(root + "/bin/coredns"); err == nil {
		m.CoreDNSGo = bi.GoVersion
		for _, d := range bi.Deps {
			if d.Path == "github.com/coredns/coredns" {
				m.Coredns += " (module github.com/coredns/coredns " + d.Version + ")"
			}
		}
	}
	out, _ := exec.Command("dnsperf", "-h").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Version "); ok {
			m.Dnsperf = strings.TrimSpace(v)
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" {
				m.ClientGo = d.Version
			}
		}
	}
	return m
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// Loadavg is the load average over 1, 5 and 15 minutes.
func Loadavg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Header is the machine and build lines of a report: where the run ran, what else ran beside it,
// and the kubetree source and CoreDNS that bin/coredns was built from.
func (m Machine) Header() string {
	return fmt.Sprintf("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other work; load average at the start %s, at the end %s\n"+
		"- build: kubetree source (bin/coredns) %s; %s\n",
		m.Nproc, m.CPU, m.Memory, m.Kernel, m.LoadStart, Loadavg(), m.Source, OrDash(m.Coredns))
}
