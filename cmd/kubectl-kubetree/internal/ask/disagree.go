package ask

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kubetree/kubetree/internal/explainapi"
)

// Answer is one replica's explanation, or why it gave none.
type Answer struct {
	Pod string
	X   *explainapi.Explanation
	Err error
}

// Disagreements says where replicas' answers differ: the rcode, the answer's records, or the
// versions of the objects they come from. A replica whose watch lags (frozen, or cut off from the
// API server) answers from older objects than the rest: the line names it and both versions. None
// when every replica that answered agrees.
func Disagreements(answers []Answer) []string {
	groups := map[string][]string{} // view -> pods
	var views []string
	for _, a := range answers {
		if a.X == nil {
			continue
		}
		v := view(a.X)
		if _, ok := groups[v]; !ok {
			views = append(views, v)
		}
		groups[v] = append(groups[v], a.Pod)
	}
	if len(views) < 2 {
		return nil
	}
	// The view most replicas share is the reference; each other one is a disagreement with it.
	slices.SortStableFunc(views, func(a, b string) int { return len(groups[b]) - len(groups[a]) })
	var out []string
	for _, v := range views[1:] {
		out = append(out, fmt.Sprintf("%s answer%s %s; %s answer%s %s",
			strings.Join(groups[v], ", "), plural(groups[v]), v, strings.Join(groups[views[0]], ", "), plural(groups[views[0]]), views[0]))
	}
	return out
}

// view is what a client sees of an explanation, and the versions it was made from.
func view(x *explainapi.Explanation) string {
	answer := RecordData(x.Answer)
	slices.Sort(answer)
	rcode := x.Rcode
	if rcode == "" {
		rcode = "nothing (outside its zones)"
	}
	s := rcode + " [" + strings.Join(answer, ", ") + "]"
	var from []string
	for _, o := range x.From {
		from = append(from, fmt.Sprintf("%s %s/%s@%s", o.Kind, o.Namespace, o.Name, o.ResourceVersion))
	}
	if len(from) > 0 {
		slices.Sort(from)
		s += " from " + strings.Join(from, ", ")
	}
	return s
}

func plural(pods []string) string {
	if len(pods) == 1 {
		return "s"
	}
	return ""
}

// RecordData is each record's type and data, without its owner, TTL and class: what differs
// between answers to one question.
func RecordData(rrs []string) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		if f := strings.Fields(rr); len(f) > 4 {
			out[i] = strings.Join(f[3:], " ")
		} else {
			out[i] = rr
		}
	}
	return out
}
