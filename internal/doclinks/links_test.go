package doclinks

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// markdownLink matches an inline link's target: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// TestMarkdownLinks checks every relative link of every .md file of the
// repository (outside .git and testdata) and its #fragment.
func TestMarkdownLinks(t *testing.T) {
	root := repoRoot(t)
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Markdown files under %s", root)
	}
	anchors := map[string]map[string]bool{}
	for _, file := range files {
		for _, l := range links(t, file) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			target, fragment, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
			}
			rel, _ := filepath.Rel(root, file)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, l.line, l.target, err)
				continue
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = headingAnchors(t, path)
			}
			if !anchors[path][fragment] {
				t.Errorf("%s:%d: link %q: no heading #%s in %s", rel, l.line, l.target, fragment, filepath.Base(path))
			}
		}
	}
}

type link struct {
	target string
	line   int
}

// links are the link targets of file outside fenced code blocks.
func links(t *testing.T, file string) []link {
	t.Helper()
	var out []link
	forEachProseLine(t, file, func(n int, line string) {
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{m[1], n})
		}
	})
	return out
}

// headingAnchors are the fragments GitHub gives the headings of file: the
// text lower-cased, without punctuation, spaces as hyphens, a repeated one
// with -1, -2...
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	seen := map[string]int{}
	out := map[string]bool{}
	forEachProseLine(t, file, func(_ int, line string) {
		if !strings.HasPrefix(line, "#") {
			return
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	})
	return out
}

// forEachProseLine calls fn with each line of file outside ``` blocks.
func forEachProseLine(t *testing.T, file string, fn func(n int, line string)) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			fn(n, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// repoRoot is the directory of go.mod above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
