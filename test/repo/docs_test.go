package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A measured figure in the README or a page of docs/ is written as a link to the place of its
// source that holds it: [1.34x](../bench/RESULTS.md#results/qps/kubetreekubernetes), the figure as
// the source has it (a ratio may add an x); cells_test.go says how a link names a place. A test's
// figures are cited in the file of its output that is committed, never in the test itself. A
// setting (a timeout, a limit, a default, a size the run is given) is not a measurement: it is
// written plainly, or as code.

var (
	// link is a Markdown link: its text and its target.
	link = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	// figureText is a link text that is a figure: it starts with a number.
	figureText = regexp.MustCompile(`^[~≈]?[0-9]`)
	// bareFigure is a measured figure written without a link: a ratio; a size, time or share of
	// the kind the benchmarks and tests measure; or a count of thousands.
	bareFigure = regexp.MustCompile(`(?:^|[^\w.,])([0-9][0-9,]*(?:\.[0-9]+)?(?:x|×|\s?(?:MiB|GiB|KiB|MB|GB|kB|B|bytes|µs|ms|s|min|%))|[0-9]{1,3}(?:,[0-9]{3})+)(?:$|[^\w])`)
	// generatedBlock opens or closes what a tool writes into a doc, the run's own committed output
	// (hack/compat.sh's table in compatibility.md): its figures need no other source.
	generatedBlock = regexp.MustCompile(`^<!-- [\w-]+:(begin|end)\b`)
	// codeSpan is inline code, where a number is a setting, not a measurement.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// TestFiguresMatchTheirSources: every local link of README.md and docs/*.md names a file that
// exists; a figure's link names the one place of its source that holds it, in the current run;
// and no measured figure goes without such a link.
func TestFiguresMatchTheirSources(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	figures := 0
	for _, doc := range append([]string{"README.md"}, docs...) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range checkDoc(doc, string(raw), &figures) {
			t.Error(problem)
		}
	}
	if figures == 0 {
		t.Fatal("found no cited figure in README.md or docs/: has the citation form changed?")
	}
}

// checkDoc is what is wrong with the links and figures of doc, whose text is markdown; it counts
// the figures it finds.
func checkDoc(doc, markdown string, figures *int) []string {
	var problems []string
	fenced, generated := false, false
	for i, line := range strings.Split(markdown, "\n") {
		switch t := strings.TrimSpace(line); {
		case strings.HasPrefix(t, "~~~") || strings.HasPrefix(t, "```"):
			fenced = !fenced
			continue
		case generatedBlock.MatchString(t):
			generated = strings.Contains(t, ":begin")
			continue
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			text, target := m[1], m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if figureText.MatchString(text) {
				*figures++
			}
			if problem := checkCitation(doc, text, target); problem != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", doc, i+1, problem))
			}
		}
		prose := codeSpan.ReplaceAllString(link.ReplaceAllString(line, ""), "")
		if generated {
			continue
		}
		for _, m := range bareFigure.FindAllStringSubmatch(prose, -1) {
			problems = append(problems, fmt.Sprintf("%s:%d: the figure %q names no source: write it as [figure](the file#place it comes from), or a setting as code",
				doc, i+1, strings.TrimSpace(m[1])))
		}
	}
	return problems
}

// checkCitation says what is wrong with the link [text](target) of doc, or "".
func checkCitation(doc, text, target string) string {
	path, fragment, _ := strings.Cut(target, "#")
	file := filepath.Join(filepath.Dir(doc), path)
	source, err := os.ReadFile(file)
	switch {
	case err != nil && figureText.MatchString(text):
		return "the figure " + text + " cites " + file + ", which does not exist"
	case err != nil:
		return "the link " + target + " names a file that does not exist"
	case !figureText.MatchString(text):
		return ""
	case strings.HasSuffix(path, ".go"):
		return "the figure " + text + " cites the code " + file + ", where no figure can be checked: commit the output of the run it is from, and cite that"
	}
	return checkFigure(file, readSource(string(source)), text, fragment)
}
