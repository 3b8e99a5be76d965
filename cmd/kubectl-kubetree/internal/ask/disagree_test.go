package ask

import (
	"errors"
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/explainapi"
)

func explanation(rcode string, rv string, answer ...string) *explainapi.Explanation {
	return &explainapi.Explanation{Rcode: rcode, Answer: answer, From: []explainapi.Object{{Kind: "Service", Namespace: "shop", Name: "web", ResourceVersion: rv}}}
}

func TestDisagreements(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers []Answer
		want    []string
	}{
		{"replicas that agree", []Answer{
			{Pod: "a", X: explanation("NOERROR", "7", "x. 5 IN A 10.0.0.1", "x. 5 IN A 10.0.0.2")},
			{Pod: "b", X: explanation("NOERROR", "7", "x. 5 IN A 10.0.0.2", "x. 5 IN A 10.0.0.1")}, // the same records, in another order
		}, nil},
		{"a lagging replica: an older version, another answer", []Answer{
			{Pod: "a", X: explanation("NOERROR", "9", "x. 5 IN A 10.0.0.2")},
			{Pod: "b", X: explanation("NOERROR", "7", "x. 5 IN A 10.0.0.1")},
			{Pod: "c", X: explanation("NOERROR", "9", "x. 5 IN A 10.0.0.2")},
		}, []string{"b answers NOERROR [A 10.0.0.1] from Service shop/web@7; a, c answer NOERROR [A 10.0.0.2] from Service shop/web@9"}},
		{"the same answer from another version", []Answer{
			{Pod: "a", X: explanation("NOERROR", "9", "x. 5 IN A 10.0.0.1")},
			{Pod: "b", X: explanation("NOERROR", "7", "x. 5 IN A 10.0.0.1")},
		}, []string{"b answers NOERROR [A 10.0.0.1] from Service shop/web@7; a answers NOERROR [A 10.0.0.1] from Service shop/web@9"}},
		{"a replica that did not answer is no disagreement", []Answer{
			{Pod: "a", X: explanation("NXDOMAIN", "")},
			{Pod: "b", Err: errors.New("refused")},
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Disagreements(c.answers); !slices.Equal(got, c.want) {
				t.Errorf("Disagreements =\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}
