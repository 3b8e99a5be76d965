package repo

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A figure's link names the one place of its source that holds it, in the link's fragment:
//
//	[1.34x](../bench/RESULTS.md#results/qps-median/kubetreekubernetes)  a table's cell: heading/row/column
//	[2.96 s](../bench/RELIST.md#start-ready/kubetree)                    the same, where no other cell answers
//	[3272](../bench/RELIST.md#line=the-limit-reached)                    a line outside the tables, by its words
//	[510.75 MB](../bench/WATCHCOST.md#per-replica-hour/line=an-in-tree-replicas-endpointslice-watch)
//
// Each part is a slug (lower case, words joined by -, punctuation dropped): the heading nearest
// above, the row by its first cell, the column by its header cell, the line by words in it. A part
// names the heading, row or column whose slug it is, or else every one whose slug starts with its
// words, so that a long row's name may be cut short where that stays unique. A section whose
// heading starts "Earlier run" or "Previous run" keeps an older run's figures: no doc cites them,
// and an address that names a cell of the current run and one of an older run means the current.

// place is a cell of one of a source's tables, or one of its lines outside the tables. A row is
// named by the slug of its first cell, and where that repeats in its table (a run's rounds, a
// plugin's replicas) of its first two cells joined, then three; a column by the slug of its header
// cell, and where that repeats ("bytes", "/ in-tree", "CPU", "/ in-tree") of the header before it
// joined to it; a line by its own slug.
type place struct {
	heading string // the slug of the nearest heading above
	earlier string // the heading of the earlier run it is under, or ""
	row     string // the shortest of rows that no other row of its table has
	rows    []string
	column  string // the shortest of columns that no other column of its table has; "" for a line
	columns []string
	text    string // what the cell or line holds
	line    int
}

func (p place) String() string {
	if p.column == "" {
		return fmt.Sprintf("line %d", p.line)
	}
	return fmt.Sprintf("%s/%s/%s (line %d, %q)", p.heading, p.row, p.column, p.line, p.text)
}

var (
	// earlierRun is the start of a heading over an older run's figures.
	earlierRun = regexp.MustCompile(`(?i)^(earlier|previous) runs?\b`)
	// delimiter is the row under a table's header.
	delimiter = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)
)

// readSource finds the places of a Markdown source: every table cell under its column's header,
// every other line, each under its nearest heading.
func readSource(markdown string) []place {
	var (
		places       []place
		heading      string
		earlier      string // the heading of the earlier run being read, and its level
		earlierLevel int
		fenced       bool
		lines        = strings.Split(markdown, "\n")
	)
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(t, "#"):
			level := len(t) - len(strings.TrimLeft(t, "#"))
			text := strings.TrimSpace(t[level:])
			heading = slug(text)
			if earlier != "" && level <= earlierLevel {
				earlier = ""
			}
			if earlier == "" && earlierRun.MatchString(text) {
				earlier, earlierLevel = text, level
			}
			continue
		case !fenced && strings.HasPrefix(t, "|") && i+1 < len(lines) && delimiter.MatchString(strings.TrimSpace(lines[i+1])):
			table := place{heading: heading, earlier: earlier, line: i} // line: the header's, counted from 0
			var n int
			places, n = readTable(places, table, lines[i:])
			i += n - 1 // the line after the table is read as any other
			continue
		}
		places = append(places, place{heading: heading, earlier: earlier, row: slug(t), rows: []string{slug(t)}, text: t, line: i + 1})
	}
	return places
}

// readTable appends the cells of the table that lines start with, each a copy of table with its
// row, column, text and line, and says how many lines the table took.
func readTable(places []place, table place, lines []string) ([]place, int) {
	header := cells(lines[0])
	var rows [][]string
	for _, l := range lines[2:] {
		if !strings.HasPrefix(strings.TrimSpace(l), "|") {
			break
		}
		rows = append(rows, cells(l))
	}
	columns := make([][]string, len(header))
	for j := range header {
		columns[j] = []string{slug(header[j]), slug(strings.Join(header[max(j-1, 0):j+1], " "))}
	}
	columns = names(columns)
	rowNames := make([][]string, len(rows))
	for r, row := range rows {
		for k := 1; k <= 3 && k <= len(row); k++ {
			rowNames[r] = append(rowNames[r], slug(strings.Join(row[:k], " ")))
		}
	}
	rowNames = names(rowNames)
	for r, row := range rows {
		p := table
		p.rows, p.row, p.line = rowNames[r], rowNames[r][len(rowNames[r])-1], table.line+r+3
		for j := 0; j < len(row) && j < len(header); j++ {
			p.columns, p.column, p.text = columns[j], columns[j][len(columns[j])-1], row[j]
			places = append(places, p)
		}
	}
	return places, len(rows) + 2
}

// names takes the first of each item's candidate names, and the next while the last it took is
// another's too.
func names(candidates [][]string) [][]string {
	taken := make([][]string, len(candidates))
	for i, c := range candidates {
		taken[i] = c[:1]
	}
	for k := 1; k < 3; k++ {
		count := map[string]int{}
		for _, t := range taken {
			count[t[len(t)-1]]++
		}
		for i, c := range candidates {
			if count[taken[i][len(taken[i])-1]] > 1 && k < len(c) {
				taken[i] = append(taken[i], c[k])
			}
		}
	}
	return taken
}

// cells splits a table's row into its cells (an escaped \| stays in its cell).
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	split := strings.Split(strings.ReplaceAll(row, `\|`, "\x00"), "|")
	for i, c := range split {
		split[i] = strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|"))
	}
	return split
}

// entity is an HTML character reference, such as the &nbsp; that indents a table's sub-row.
var entity = regexp.MustCompile(`&[a-z]+;`)

// slug is text in lower case, its words joined by -, its punctuation dropped.
func slug(text string) string {
	text = entity.ReplaceAllString(text, " ")
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return unicode.IsSpace(r) || r == '-'
	})
	var b strings.Builder
	for _, w := range words {
		w = strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' {
				return r
			}
			return -1
		}, w)
		if w == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('-')
		}
		b.WriteString(w)
	}
	return b.String()
}

// address is what a figure's link fragment names: a cell by heading, row and column, or a line by
// heading and words.
type address struct {
	heading, row, column, words string
}

var errAddress = errors.New("a figure's link names its place in the source: #[heading/]row/column, or #[heading/]line=words")

func parseAddress(fragment string) (address, error) {
	parts := strings.Split(fragment, "/")
	for i, p := range parts {
		parts[i] = slug(p)
	}
	if words, ok := strings.CutPrefix(fragment[strings.LastIndex(fragment, "/")+1:], "line="); ok {
		switch len(parts) {
		case 1:
			return address{words: slug(words)}, nil
		case 2:
			return address{heading: parts[0], words: slug(words)}, nil
		}
		return address{}, errAddress
	}
	switch len(parts) {
	case 2:
		return address{row: parts[0], column: parts[1]}, nil
	case 3:
		return address{heading: parts[0], row: parts[1], column: parts[2]}, nil
	}
	return address{}, errAddress
}

// find is every place that a names.
func (a address) find(places []place) []place {
	if a.heading != "" {
		places = narrow(places, a.heading, func(p place) []string { return []string{p.heading} })
	}
	if a.words != "" {
		var lines []place
		for _, p := range places {
			if p.column == "" && strings.Contains("-"+p.row+"-", "-"+a.words+"-") {
				lines = append(lines, p)
			}
		}
		return lines
	}
	places = narrow(places, a.row, func(p place) []string { return p.rows })
	return narrow(places, a.column, func(p place) []string { return p.columns })
}

// narrow keeps the places with a name that is key; if none, those with a name that starts with
// key's words.
func narrow(places []place, key string, names func(place) []string) []place {
	var exact, prefix []place
	for _, p := range places {
		switch {
		case slices.Contains(names(p), key):
			exact = append(exact, p)
		case slices.ContainsFunc(names(p), func(n string) bool { return strings.HasPrefix(n, key+"-") }):
			prefix = append(prefix, p)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return prefix
}

// checkFigure says what is wrong with citing figure to the place of file (whose places are given)
// that fragment names, or "".
func checkFigure(file string, places []place, figure, fragment string) string {
	cited := fmt.Sprintf("the figure %s cites %s#%s", figure, file, fragment)
	a, err := parseAddress(fragment)
	if fragment == "" || err != nil {
		return cited + ": " + errAddress.Error() + whereItIs(places, figure)
	}
	var current, earlier []place
	for _, p := range a.find(places) {
		if p.earlier != "" {
			earlier = append(earlier, p)
		} else {
			current = append(current, p)
		}
	}
	switch {
	case len(current) == 1 && holds(current[0].text, figure):
		return ""
	case len(current) == 1:
		return fmt.Sprintf("%s, which holds %q, not the figure%s", cited, current[0].text, whereItIs(places, figure))
	case len(current) > 1:
		return fmt.Sprintf("%s, which names %d places: %s", cited, len(current), list(current))
	case len(earlier) > 0:
		return fmt.Sprintf("%s, which cites an older run (%q): %s", cited, earlier[0].earlier, list(earlier))
	}
	return cited + ", which names no cell or line there" + whereItIs(places, figure)
}

// whereItIs says where in the source the figure is, to help put it right.
func whereItIs(places []place, figure string) string {
	var at []place
	for _, p := range places {
		if holds(p.text, figure) {
			at = append(at, p)
		}
	}
	if len(at) == 0 {
		return "; the source has it nowhere"
	}
	return "; the source has it at " + list(at)
}

func list(places []place) string {
	var s []string
	for i, p := range places {
		if i == 4 {
			s = append(s, fmt.Sprintf("and %d more", len(places)-i))
			break
		}
		what := p.String()
		if p.earlier != "" {
			what += " in an older run"
		}
		s = append(s, what)
	}
	return strings.Join(s, ", ")
}

var (
	// thousands is a digit group separator, which docs write and bench files mostly do not.
	thousands = regexp.MustCompile(`([0-9]),([0-9]{3})`)
	// unitSpace is the space between a number and its unit.
	unitSpace = regexp.MustCompile(`([0-9])\s+([^\s0-9])`)
	// ratio is a figure that is a ratio, written with an x the source may leave off.
	ratio = regexp.MustCompile(`^([0-9.]+)[x×]$`)
)

// holds reports whether text has the figure as a number of its own (not inside a longer one),
// with digit groups written either way, a ratio's x left off, a unit after a space or not.
func holds(text, figure string) bool {
	f := ratio.ReplaceAllString(normalize(strings.TrimLeft(figure, "~≈")), "$1")
	text = normalize(text)
	for from := 0; ; {
		i := strings.Index(text[from:], f)
		if i < 0 || f == "" {
			return false
		}
		start, end := from+i, from+i+len(f)
		before := start > 0 && (isDigit(text[start-1]) || text[start-1] == '.')
		after := end < len(text) && (isDigit(text[end]) ||
			text[end] == '.' && end+1 < len(text) && isDigit(text[end+1]))
		if !before && !after && !(endsInLetter(f) && startsWithLetter(text[end:])) {
			return true
		}
		from = start + 1
	}
}

func normalize(s string) string {
	for {
		n := thousands.ReplaceAllString(s, "$1$2")
		if n == s {
			return unitSpace.ReplaceAllString(s, "$1$2")
		}
		s = n
	}
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func endsInLetter(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsLetter(r)
}

func startsWithLetter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r)
}
