package shell_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/shell/shelltest"
)

// pageRoundTrips is how many round trips the test page's script takes:
// that many synchronous requests, one after the other on the page's
// connection. (The navigation before it, connection and page, is not
// counted: Chromium may open the connection before the page's time origin.)
const pageRoundTrips = 5

// page is the test page: its script fetches /r1, /r2, ... synchronously,
// so each waits for the one before, and then writes how long that took
// into the body.
var page = func() string {
	var b strings.Builder
	b.WriteString("<!doctype html><html><body><script>\nconst start = performance.now();\n")
	for i := 1; i <= pageRoundTrips; i++ {
		fmt.Fprintf(&b, "{const x = new XMLHttpRequest(); x.open('GET', '/r%d', false); x.send();}\n", i)
	}
	b.WriteString("document.body.dataset.loaded = performance.now() - start;\n</script></body></html>\n")
	return b.String()
}()

var loadedRe = regexp.MustCompile(`data-loaded="([0-9.]+)"`)

// chromium returns a headless Chromium; the test command installs
// Debian's, without it the test skips (fails under CI).
func chromium(t *testing.T) string {
	for _, n := range []string{"chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return testenv.RequireCommand(t, "chromium")
}

// TestChromiumInShellFollowsRTT loads a page served from the test's
// internet in headless Chromium inside a shell, at 2 ms and at 100 ms
// round trips: the page's script takes pageRoundTrips round trips, so its
// time grows by that many times the difference.
func TestChromiumInShellFollowsRTT(t *testing.T) {
	bin := chromium(t)
	w := shelltest.New(t)
	before := w.State(t)
	var ln net.Listener
	w.Internet.Do(t, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(shelltest.InternetAddr, "8080"))
		return err
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			rw.Header().Set("Content-Type", "text/html")
			fmt.Fprint(rw, page)
			return
		}
		rw.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(rw, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })

	load := func(delay time.Duration) time.Duration {
		t.Helper()
		dir := t.TempDir()
		out, code := w.Run(t, "shell", "--impair", fmt.Sprintf("delay %dms", delay.Milliseconds()), "--",
			bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
			"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "http://"+shelltest.InternetAddr+":8080/")
		if code != 0 {
			t.Fatalf("chromium in a shell with delay %v: exit %d\n%s", delay, code, out)
		}
		m := loadedRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the page did not finish: DOM %q", out)
		}
		ms, _ := strconv.ParseFloat(m[1], 64)
		return time.Duration(ms * float64(time.Millisecond))
	}
	fast, slow := load(time.Millisecond), load(50*time.Millisecond)
	want := pageRoundTrips * (100 - 2) * time.Millisecond
	t.Logf("page of %d round trips: %v at 2 ms round trips, %v at 100 ms: %v more (want %v)", pageRoundTrips, fast, slow, slow-fast, want)
	// A tenth of the growth: Chromium's own work varies between loads.
	if got := slow - fast; (got - want).Abs() > want/10 {
		t.Errorf("load time grew by %v from 2 ms to 100 ms round trips: want %v ± 10 %% (%d round trips)", got, want, pageRoundTrips)
	}
	w.RequireState(t, before, "host not restored after the shells")
}
