package repo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A measured figure in the README or a page of docs/ is written as a link to its source:
// [1.34x](../bench/RESULTS.md), the figure as the source has it (a ratio may add an x), or
// [30 s](../test/e2e/fault_test.go#TestAPIServerOutage) for one a test sets or reports. A setting
// (a timeout, a limit, a default) is not a measurement: it is written plainly, or as code.

var (
	// link is a Markdown link: its text and its target.
	link = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	// figureText is a link text that is a figure: it starts with a number.
	figureText = regexp.MustCompile(`^[~≈]?[0-9]`)
	// bareFigure is a measured figure written without a link: a ratio, or a size or time of the
	// kind the benchmarks measure.
	bareFigure = regexp.MustCompile(`(?:^|[^\w.])([0-9][0-9,]*(?:\.[0-9]+)?(?:x|×|\s?(?:MiB|GiB|KiB|MB|GB|kB|µs|ms))(?:$|[^\w]))`)
	// codeSpan is inline code, where a number is a setting, not a measurement.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// thousands is a digit group separator, which docs write and bench files mostly do not.
	thousands = regexp.MustCompile(`([0-9]),([0-9]{3})`)
)

// TestFiguresMatchTheirSources: every local link of README.md and docs/*.md names a file that
// exists; a figure's link names the file the figure is in (or a test that exists, for a figure a
// test reports), and the figure is there; and no measured figure goes without such a link.
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
		fenced := false
		for i, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "~~~") || strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
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
					figures++
				}
				if problem := checkCitation(doc, text, target); problem != "" {
					t.Errorf("%s:%d: %s", doc, i+1, problem)
				}
			}
			prose := codeSpan.ReplaceAllString(link.ReplaceAllString(line, ""), "")
			for _, m := range bareFigure.FindAllStringSubmatch(prose, -1) {
				t.Errorf("%s:%d: the figure %q names no source: write it as [figure](the bench file or test it comes from)",
					doc, i+1, strings.TrimSpace(strings.Trim(m[1], "().,;:")))
			}
		}
	}
	if figures == 0 {
		t.Fatal("found no cited figure in README.md or docs/: has the citation form changed?")
	}
}

// checkCitation says what is wrong with the link [text](target) of doc, or "".
func checkCitation(doc, text, target string) string {
	path, fragment, _ := strings.Cut(target, "#")
	file := filepath.Join(filepath.Dir(doc), path)
	source, err := os.ReadFile(file)
	if err != nil {
		if figureText.MatchString(text) {
			return "the figure " + text + " cites " + file + ", which does not exist"
		}
		return "the link " + target + " names a file that does not exist"
	}
	if !figureText.MatchString(text) {
		return ""
	}
	if strings.HasSuffix(path, "_test.go") {
		if fragment == "" || !regexp.MustCompile(`(?m)^func `+regexp.QuoteMeta(fragment)+`\(`).Match(source) {
			return "the figure " + text + " cites the test " + fragment + ", which " + file + " does not define"
		}
		return ""
	}
	if !holdsFigure(string(source), text) {
		return "the figure " + text + " is not in its source " + file
	}
	return ""
}

// holdsFigure reports whether source has the figure, as a number of its own (not inside a longer
// one), with digit groups written either way and a ratio's x left off.
func holdsFigure(source, figure string) bool {
	figure = strings.TrimLeft(figure, "~≈")
	figure = strings.TrimSuffix(strings.TrimSuffix(figure, "x"), "×")
	figure = thousands.ReplaceAllString(figure, "$1$2")
	source = thousands.ReplaceAllString(source, "$1$2")
	for from := 0; ; {
		i := strings.Index(source[from:], figure)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(figure)
		before := start > 0 && (isDigit(source[start-1]) || source[start-1] == '.')
		after := end < len(source) && (isDigit(source[end]) ||
			source[end] == '.' && end+1 < len(source) && isDigit(source[end+1]))
		if !before && !after {
			return true
		}
		from = start + 1
	}
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
