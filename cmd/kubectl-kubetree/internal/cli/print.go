package cli

import (
	"encoding/json"
	"fmt"
	"io"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// The -o formats; "" is a table.
const (
	formatJSON = "json"
	formatYAML = "yaml"
)

func checkFormat(format string) error {
	switch format {
	case "", formatJSON, formatYAML:
		return nil
	}
	return fmt.Errorf("-o %s: the formats are json and yaml (a table without -o)", format)
}

// printTable prints rows under columns as kubectl prints a table: cli-runtime's table printer,
// which aligns the columns and escapes what a terminal would act on.
func printTable(w io.Writer, columns []string, rows [][]any) error {
	t := &meta.Table{}
	for _, c := range columns {
		t.ColumnDefinitions = append(t.ColumnDefinitions, meta.TableColumnDefinition{Name: c, Type: "string"})
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, meta.TableRow{Cells: r})
	}
	return printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(t, w)
}

// printData prints v as JSON or YAML.
func printData(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == formatYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// colored wraps s in an ANSI colour when w is a terminal that wants colour (cli-runtime's rule,
// which honours NO_COLOR).
func colored(w io.Writer, s string, code int) string {
	if !printers.AllowsColorOutput(w) {
		return s
	}
	return fmt.Sprintf("\x1b[%dm%s\x1b[0m", code, s)
}

const (
	red   = 31
	green = 32
)
