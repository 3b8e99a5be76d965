package doctor

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	api "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// dnsq is the program of the doctor's image that asks DNS as a pod's Go program does, through
// the pod's resolv.conf (hack/tools/cmd/dnsq): the image kubetree/dnsq is built by make node-images.
const dnsq = "/dnsq"

// lookupTimeout bounds one lookup in the pod: a DNS that does not answer costs this much a check.
const lookupTimeout = "5s"

// podResolver asks DNS by running dnsq in a pod (kubectl exec's API: pods/exec).
type podResolver struct {
	cfg       *rest.Config
	c         kubernetes.Interface
	namespace string
	pod       string
}

func (p podResolver) Lookup(ctx context.Context, qtype, name string) ([]string, error) {
	out, err := p.exec(ctx, dnsq, "-timeout", lookupTimeout, "-t", qtype, name)
	if err != nil {
		return nil, err
	}
	return nonEmptyLines(out), nil
}

func nonEmptyLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func (p podResolver) ResolvConf(ctx context.Context) (string, error) {
	return p.exec(ctx, dnsq, "-t", "conf")
}

func (p podResolver) exec(ctx context.Context, command ...string) (string, error) {
	req := p.c.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.namespace).Name(p.pod).SubResource("exec").
		VersionedParams(&api.PodExecOptions{Container: "dnsq", Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(p.cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return stdout.String(), fmt.Errorf("%s", msg)
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}
