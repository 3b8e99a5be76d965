package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bench is a source as the bench files are: tables under headings, a line of prose with a figure,
// and an older run kept below the current one.
const bench = `# A bench run

| metric | kubernetes | kubetree | kubetree/kubernetes |
| --- | ---: | ---: | ---: |
| QPS (median of rounds) | 22959 | 30724 | 1.34 |
| p99 latency | 11.171 ms | 7.646 ms | 0.68 |
| p50 latency | 1.2 ms | 1.2 ms | 1.00 |

What the option adds: 402 B per node.

## Pods

| metric | kubernetes | kubetree |
| --- | ---: | ---: |
| p50 latency | 1.2 ms | 1.2 ms |

## Earlier runs

### Before the cut

| metric | kubernetes | kubetree | kubetree/kubernetes |
| --- | ---: | ---: | ---: |
| QPS (median of rounds) | 21000 | 28140 | 1.34 |
`

// TestFigureCheck: the check passes a figure cited to the cell or line that holds it, and fails
// one cited anywhere else, saying where the figure is.
func TestFigureCheck(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"bench.md":      bench,
		"fault_test.go": "package e2e\n\nfunc TestAPIServerOutage(t *testing.T) {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, doc string
		want      string // in the one problem found, or "" for none
	}{
		{"a ratio, by heading, row and column", "[1.34x](bench.md#a-bench-run/qps/kubetreekubernetes)", ""},
		{"a cell that no other matches, without its heading", "[7.646 ms](bench.md#p99-latency/kubetree)", ""},
		{"digit groups and a unit's space either way", "[22,959](bench.md#qps/kubernetes) and [11.171ms](bench.md#p99-latency/kubernetes)", ""},
		{"a line, by words in it", "[402 B](bench.md#line=what-the-option-adds)", ""},
		{"a setting, as code", "a `30 s` outage", ""},
		{"the kubetree and in-tree columns swapped", "[22959](bench.md#qps/kubetree)",
			`the figure 22959 cites ` + dir + `/bench.md#qps/kubetree, which holds "30724", not the figure; the source has it at a-bench-run/qps-median-of-rounds/kubernetes`},
		{"the last digit changed", "[1.35x](bench.md#qps/kubetreekubernetes)",
			`which holds "1.34", not the figure; the source has it nowhere`},
		{"a figure of an older run", "[28140](bench.md#before-the-cut/qps/kubetree)",
			`which cites an older run ("Earlier runs"): before-the-cut/qps-median-of-rounds/kubetree`},
		{"an older run's figure where the current run has another", "[28140](bench.md#qps/kubetree)",
			`which holds "30724", not the figure; the source has it at before-the-cut/qps-median-of-rounds/kubetree (line 23, "28140") in an older run`},
		{"a figure cited to a test", "[30 s](fault_test.go#TestAPIServerOutage)",
			"the figure 30 s cites the code " + dir + "/fault_test.go, where no figure can be checked: commit the output of the run it is from, and cite that"},
		{"a cell that two tables have", "[1.2 ms](bench.md#p50-latency/kubetree)",
			"which names 2 places: a-bench-run/p50-latency/kubetree (line 7, \"1.2 ms\"), pods/p50-latency/kubetree (line 15, \"1.2 ms\")"},
		{"a figure linked to its file alone", "[1.34x](bench.md)",
			"a figure's link names its place in the source: #[heading/]row/column, or #[heading/]line=words"},
		{"a place that is not there", "[1.34x](bench.md#qps/ratio)", "which names no cell or line there"},
		{"a measured count without a source", "it asked 8,784 names", `the figure "8,784" names no source`},
		{"a time without a source", "an outage of 30 s", `the figure "30 s" names no source`},
		{"a share without a source", "70% of the queries", `the figure "70%" names no source`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var figures int
			problems := checkDoc(filepath.Join(dir, "doc.md"), c.doc, &figures)
			switch {
			case c.want == "" && len(problems) > 0:
				t.Errorf("%s: %s", c.doc, strings.Join(problems, "\n"))
			case c.want != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.want)):
				t.Errorf("%s: got %q, want one problem with %q", c.doc, problems, c.want)
			}
		})
	}
}
