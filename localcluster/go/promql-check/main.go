// promql-check: rules files checked as Prometheus reads them, for zeroscaler's chart tests (the
// PrometheusRule's alerts, and the Grafana dashboard's queries written out as recording rules).
//
// Each file goes through Prometheus's own rules-file reader, model/rulefmt, at the version go.mod
// pins (the one localcluster/versions.toml names): unknown fields are refused, each group needs a
// name of its own, each rule exactly one of alert and record, valid label and annotation names,
// alert templates that parse, and an expr that the PromQL parser (promql/parser, default features)
// accepts. That is the check `promtool check rules` makes, without the rest of Prometheus (storage,
// service discovery, cloud SDKs) that promtool links.
//
// Usage: promql-check FILE...
// A valid file prints one line: the file, its group and rule counts. A refused one prints every
// problem on stderr, each naming the file; a rule's also name its line:column, its group, its
// number and name, and the reason (a parse error says where in the expression it is). A file with
// no rules at all is refused too. Exit status 1 if any file was refused, 2 on a usage error.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: promql-check FILE...  (Prometheus rules files: groups of alert and record rules)")
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	refused := false
	for _, file := range flag.Args() {
		problems := check(file)
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, p)
		}
		refused = refused || len(problems) > 0
	}
	if refused {
		os.Exit(1)
	}
}

// check reads one rules file as Prometheus would load it; it returns the problems, none if valid.
func check(file string) []string {
	var skipped []string
	logger := slog.New(logged{&skipped})
	promql := parser.NewParser(parser.Options{})
	read, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, promql, logger)
	problems := make([]string, 0, len(errs)+len(skipped))
	for _, err := range errs {
		problems = append(problems, err.Error())
	}
	// The reader only logs what it leaves out (a second YAML document): here that refuses the file.
	for _, message := range skipped {
		problems = append(problems, fmt.Sprintf("%s: %s", file, message))
	}
	if len(problems) > 0 {
		return problems
	}
	rules := 0
	for _, group := range read.Groups {
		rules += len(group.Rules)
	}
	if rules == 0 {
		// Valid to Prometheus, but a test that wrote no rules would otherwise pass unnoticed.
		return []string{fmt.Sprintf("%s: no rules found (a rules file has groups:, each with a name and rules:, each rule an alert: or a record: with an expr:)", file)}
	}
	fmt.Printf("%s: valid (groups %d, rules %d)\n", file, len(read.Groups), rules)
	return nil
}

// logged keeps the messages of a slog.Logger, so that what the reader only warns about is seen.
type logged struct{ messages *[]string }

func (l logged) Enabled(context.Context, slog.Level) bool { return true }

func (l logged) Handle(_ context.Context, record slog.Record) error {
	*l.messages = append(*l.messages, record.Message)
	return nil
}

func (l logged) WithAttrs([]slog.Attr) slog.Handler { return l }

func (l logged) WithGroup(string) slog.Handler { return l }
