// Command conftable writes the results of Kubernetes e2e runs as a Markdown table, one column per
// run, from the JUnit reports Ginkgo writes (e2e.test --ginkgo.junit-report):
//
//	conftable -match '\[sig-network\] DNS' kubetree=_out/conformance/kubetree/junit.xml \
//	    in-tree=_out/conformance/kubernetes/junit.xml
//
// A cell is the result and, unless skipped, the test's duration in seconds. Only the test cases
// whose name matches -match are listed (the report also holds every spec the focus left out, as
// skipped). A summary line per column gives the counts; every test that is not
// passed in some column is listed again below the table with the reason from its report.
package main

import (
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

type testCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
}

type result struct {
	status, reason string
	seconds        float64
}

// labels is the list of Ginkgo labels the JUnit report appends to a name ("[sig-network, Conformance]"),
// which repeats the bracketed tags already in it.
var labels = regexp.MustCompile(` \[sig-[^\]]*\]$`)

func main() {
	match := flag.String("match", `\[sig-network\] DNS`, "regular expression: the test cases to list")
	skip := flag.String("skip", "", "the run's --ginkgo.skip, named as the reason of the tests it left out")
	flag.Parse()
	re, err := regexp.Compile(*match)
	if err != nil || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: conftable [-match RE] COLUMN=JUNIT.xml...")
		os.Exit(2)
	}
	var cols []string
	results := map[string]map[string]result{} // test -> column -> result
	for _, a := range flag.Args() {
		col, file, ok := strings.Cut(a, "=")
		if !ok {
			fail(fmt.Errorf("%q: want COLUMN=FILE", a))
		}
		cols = append(cols, col)
		cases, err := read(file)
		if err != nil {
			fail(err)
		}
		for _, c := range cases {
			name := labels.ReplaceAllString(strings.TrimPrefix(c.Name, "[It] "), "")
			if !re.MatchString(name) {
				continue
			}
			if results[name] == nil {
				results[name] = map[string]result{}
			}
			r := classify(c)
			r.seconds = c.Time
			if r.status == "skipped" && r.reason == "skipped" && *skip != "" {
				r.reason = "left out by --ginkgo.skip `" + strings.ReplaceAll(*skip, "|", `\|`) + "`"
			}
			results[name][col] = r
		}
	}
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)

	fmt.Printf("| test | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, n := range names {
		row := make([]string, len(cols))
		for i, c := range cols {
			r, ok := results[n][c]
			if !ok {
				r.status = "not run"
			}
			row[i] = r.status
			if r.status != "not run" && r.status != "skipped" {
				row[i] += fmt.Sprintf(" (%.0f s)", r.seconds)
			}
		}
		fmt.Printf("| %s | %s |\n", n, strings.Join(row, " | "))
	}
	fmt.Println()
	for _, c := range cols {
		count := map[string]int{}
		for _, n := range names {
			if r, ok := results[n][c]; ok {
				count[r.status]++
			}
		}
		fmt.Printf("- %s: %d tests, %d passed, %d failed, %d skipped\n", c, count["passed"]+count["failed"]+count["skipped"],
			count["passed"], count["failed"], count["skipped"])
	}
	fmt.Println()
	for _, n := range names {
		for _, c := range cols {
			if r, ok := results[n][c]; ok && r.status != "passed" {
				fmt.Printf("- %s, %s: **%s**: %s\n", n, c, r.status, r.reason)
			}
		}
	}
}

func read(file string) ([]testCase, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []testCase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	var cases []testCase
	for _, s := range doc.Suites {
		cases = append(cases, s.Cases...)
	}
	return cases, nil
}

// classify reduces Ginkgo's states to passed, failed and skipped, with the first line of the reason.
func classify(c testCase) result {
	switch {
	case c.Failure != nil:
		return result{status: "failed", reason: firstLine(c.Failure.Message + "\n" + c.Failure.Text)}
	case c.Error != nil:
		return result{status: "failed", reason: firstLine(c.Error.Message)}
	case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
		msg := ""
		if c.Skipped != nil {
			msg = c.Skipped.Message
		}
		return result{status: "skipped", reason: firstLine(msg)}
	case c.Status == "" || c.Status == "passed":
		return result{status: "passed", reason: ""}
	}
	return result{status: "failed", reason: c.Status}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return strings.ReplaceAll(l, "|", `\|`)
		}
	}
	return "(no reason given)"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "conftable:", err)
	os.Exit(1)
}
