package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func pushCommand(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "", "the OCI layout `release index` wrote")
	to := fs.String("to", "", "REPO:TAG to push to")
	ca := fs.String("ca", "", "PEM file of the CA the registry's certificate chains to (default: the system's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *to == "" || fs.NArg() != 0 {
		return errors.New("want -layout DIR -to REPO:TAG")
	}
	tag, err := name.NewTag(*to, name.StrictValidation)
	if err != nil {
		return err
	}
	transport, err := transportTrusting(*ca)
	if err != nil {
		return err
	}
	d, err := push(*dir, tag, remote.WithTransport(transport))
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

// push writes the layout's index (and its images), or its one image, to tag, then asks the
// registry for it by digest: what a node will pull must be what the release's manifests name.
func push(dir string, tag name.Tag, opts ...remote.Option) (name.Digest, error) {
	var want v1.Hash
	if idx, err := layoutIndex(dir); err == nil {
		if want, err = idx.Digest(); err != nil {
			return name.Digest{}, err
		}
		if err := remote.WriteIndex(tag, idx, opts...); err != nil {
			return name.Digest{}, err
		}
	} else if img, ierr := onlyImage(dir); ierr == nil {
		if want, err = img.Digest(); err != nil {
			return name.Digest{}, err
		}
		if err := remote.Write(tag, img, opts...); err != nil {
			return name.Digest{}, err
		}
	} else {
		return name.Digest{}, fmt.Errorf("%s holds neither one image index (%v) nor one image (%v)", dir, err, ierr)
	}
	ref := tag.Context().Digest(want.String())
	got, err := remote.Head(ref, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("the registry does not serve %s after the push: %v", ref, err)
	}
	if got.Digest != want {
		return name.Digest{}, fmt.Errorf("the registry serves %s as %s %s", ref, got.MediaType, got.Digest)
	}
	return ref, nil
}

// transportTrusting is an HTTPS transport that trusts the CA in caFile (or the system's roots).
func transportTrusting(caFile string) (http.RoundTripper, error) {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}
