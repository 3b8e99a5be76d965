package measure

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ControlPlane is etcd + kube-apiserver run by hack/cluster.sh in dir.
type ControlPlane struct {
	Root, Dir  string
	Kubeconfig string
	Version    string
	Client     kubernetes.Interface
	started    bool
}

// Start starts etcd and kube-apiserver in cp.Dir (hack/cluster.sh start) and connects to them.
func (cp *ControlPlane) Start(ctx context.Context) error {
	cp.started = true
	// Not bound to ctx: cluster.sh has its own time limit, and killing it half way would leave
	// daemons that `stop` might not find. An interrupt is acted on right after.
	out, err := exec.Command(filepath.Join(cp.Root, "hack/cluster.sh"), "start", cp.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/cluster.sh start: %v\n%s", err, out)
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	env := readEnv(filepath.Join(cp.Dir, "env"))
	cp.Kubeconfig = env["KUBECONFIG"]
	if cp.Kubeconfig == "" {
		return fmt.Errorf("%s/env has no KUBECONFIG", cp.Dir)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return err
	}
	// Creating thousands of objects: lift client-go's default 5 QPS / 10 burst.
	rc.QPS, rc.Burst = 2000, 4000
	rc.Timeout = 30 * time.Second
	cp.Client, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	cp.Version = v.GitVersion
	Logf("control plane up in %s (kube-apiserver %s)", cp.Dir, cp.Version)
	return nil
}

// Stop stops them (hack/cluster.sh stop), if Start ran.
func (cp *ControlPlane) Stop() error {
	if !cp.started {
		return nil
	}
	out, err := exec.Command(filepath.Join(cp.Root, "hack/cluster.sh"), "stop", cp.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/cluster.sh stop: %v\n%s", err, out)
	}
	return nil
}

func readEnv(path string) map[string]string {
	vars := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return vars
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			vars[k] = strings.Trim(v, `"'`)
		}
	}
	return vars
}

// Processes is the API server's address (host:port, from the kubeconfig) and the PIDs of
// kube-apiserver and etcd.
func (cp *ControlPlane) Processes() (target string, pids map[string]int, err error) {
	if target, err = apiServerAddr(cp.Kubeconfig); err != nil {
		return "", nil, err
	}
	pids = map[string]int{}
	for _, p := range []string{"kube-apiserver", "etcd"} {
		if pids[p], err = ReadPID(filepath.Join(cp.Dir, p+".pid")); err != nil {
			return "", nil, err
		}
	}
	return target, pids, nil
}

// apiServerAddr is host:port of the API server in kubeconfig's current context.
func apiServerAddr(kubeconfig string) (string, error) {
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return "", fmt.Errorf("%s: no current context", kubeconfig)
	}
	c, ok := kc.Clusters[ctx.Cluster]
	if !ok {
		return "", fmt.Errorf("%s: no cluster %q", kubeconfig, ctx.Cluster)
	}
	u, err := url.Parse(c.Server)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// ReadPID reads a pid file.
func ReadPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// ProtobufClient writes the churn and the probes' changes: protobuf, as the controllers do, and no
// client-side rate limit.
func ProtobufClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.QPS, rc.Burst = -1, 0
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}
