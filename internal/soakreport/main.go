// Command soakreport summarises repeated runs of the test suite: it reads
// the `go test -json` output of each run (one file per run) and prints, per
// test, how many runs it took part in, how many of them failed and its
// slowest time, then the failures' output. scripts/soak-tests.sh runs it;
// it exits 1 when any run of any test (or package) failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	// ImportPath names the package of a build event ("build-output",
	// "build-fail"), as "pkg [pkg.test]" for a test binary.
	ImportPath string
}

type key struct{ pkg, test string }

// stats is one test's (or, with an empty test, one package's) record over
// all runs.
type stats struct {
	runs, fails, skips int
	slowest            float64
	// failOutput holds the output of each failed run, run number first.
	failOutput []string
}

// run is what one file says: the final action per test and its output.
type run struct {
	final  map[key]event
	output map[key]*strings.Builder
}

// unfinished marks a test that started but has no final action: a panic
// or the -timeout ended the test binary while it ran. It counts as failed.
const unfinished = "unfinished"

func readRun(r io.Reader) (run, error) {
	rn := run{final: map[key]event{}, output: map[key]*strings.Builder{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // go vet or build chatter mixed into the file
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return rn, err
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			// A compile error: kept with the package, whose fail event
			// follows.
			pkg, _, _ := strings.Cut(e.ImportPath, " ")
			k = key{pkg, ""}
			fallthrough
		case "output":
			b := rn.output[k]
			if b == nil {
				b = &strings.Builder{}
				rn.output[k] = b
			}
			b.WriteString(e.Output)
		case "run":
			if _, ok := rn.final[k]; !ok {
				rn.final[k] = event{Action: unfinished, Package: e.Package, Test: e.Test}
			}
		case "pass", "fail", "skip":
			rn.final[k] = e
		}
	}
	return rn, sc.Err()
}

func main() {
	maxOutput := flag.Int("output", 60, "lines of a failed test's output to print (0: none)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: soakreport [-output LINES] RUN.json...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	all := map[key]*stats{}
	get := func(k key) *stats {
		s := all[k]
		if s == nil {
			s = &stats{}
			all[k] = s
		}
		return s
	}
	var runWall []float64
	for i, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		rn, err := readRun(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		var wall float64
		for k, e := range rn.final {
			s := get(k)
			s.runs++
			s.slowest = max(s.slowest, e.Elapsed)
			if k.test == "" {
				wall = max(wall, e.Elapsed)
			}
			switch e.Action {
			case "skip":
				s.skips++
			case "fail", unfinished:
				s.fails++
				out := ""
				if b := rn.output[k]; b != nil {
					out = b.String()
				}
				s.failOutput = append(s.failOutput, fmt.Sprintf("run %d (%s):\n%s", i+1, path, tail(out, *maxOutput)))
			}
		}
		runWall = append(runWall, wall)
	}
	keys := make([]key, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.pkg, b.pkg); c != 0 {
			return c
		}
		return strings.Compare(a.test, b.test)
	})
	module := commonPrefix(keys)
	const row = "%5s %8s %9s  %s\n"
	fmt.Printf(row, "runs", "failures", "slowest", "test")
	var tests, runs, fails, failedTests int
	for _, k := range keys {
		s := all[k]
		name := strings.TrimPrefix(k.pkg, module)
		if name == "" {
			name = "."
		}
		if k.test == "" {
			name += " (package)"
		} else {
			name += " " + k.test
			tests++
			runs += s.runs
			fails += s.fails
		}
		if s.fails > 0 && k.test != "" {
			failedTests++
		}
		mark := ""
		if s.fails > 0 {
			mark = "  FAIL"
		}
		if s.skips == s.runs {
			mark = "  skipped"
		}
		fmt.Printf(row, strconv.Itoa(s.runs), strconv.Itoa(s.fails), fmtSeconds(s.slowest), name+mark)
	}
	var pkgFails int
	for _, k := range keys {
		if k.test == "" {
			pkgFails += all[k].fails
		}
	}
	fmt.Printf("total: %d runs of the suite, %d tests, %d test runs, %d failed (%d tests failed at least once), %d failed package runs; slowest package per run: %s\n",
		len(flag.Args()), tests, runs, fails, failedTests, pkgFails, fmtList(runWall))
	if fails+pkgFails == 0 {
		return
	}
	if *maxOutput > 0 {
		for _, k := range keys {
			s := all[k]
			if s.fails == 0 || (k.test == "" && hasFailedTest(all, k.pkg)) {
				continue // a package that failed only through its tests
			}
			name := k.test
			if name == "" {
				name = "(package)"
			}
			fmt.Printf("\n=== %s %s: %d of %d runs failed\n", k.pkg, name, s.fails, s.runs)
			for _, o := range s.failOutput {
				fmt.Print(o)
			}
		}
	}
	os.Exit(1)
}

// hasFailedTest reports whether a test of pkg failed in some run.
func hasFailedTest(all map[key]*stats, pkg string) bool {
	for k, s := range all {
		if k.pkg == pkg && k.test != "" && s.fails > 0 {
			return true
		}
	}
	return false
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{"\t...\n"}, lines[len(lines)-n:]...)
	}
	out := strings.Join(lines, "")
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}

// commonPrefix is the module path the packages share ("…/wanlab/"), left
// out of the table to keep it narrow.
func commonPrefix(keys []key) string {
	if len(keys) == 0 {
		return ""
	}
	p := keys[0].pkg
	for _, k := range keys[1:] {
		for !strings.HasPrefix(k.pkg, p) {
			p = p[:len(p)-1]
		}
	}
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i+1]
	}
	return ""
}

func fmtSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(10 * time.Millisecond).String()
}

func fmtList(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmtSeconds(v)
	}
	return strings.Join(parts, ", ")
}
