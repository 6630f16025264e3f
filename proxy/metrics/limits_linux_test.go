package metrics

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/htb"
)

func TestMain(m *testing.M) {
	testenv.RunChildIfAsked()
	os.Exit(m.Run())
}

// manyClasses is a direction with n engine classes and n htb classes.
func manyClasses(n int) control.Stats {
	d := control.Direction{Iface: "veth-a"}
	var hs []htb.ClassStats
	for i := range n {
		name := fmt.Sprintf("1:%x", i+2)
		d.Engine.Classes = append(d.Engine.Classes, engine.ClassSnapshot{Name: name,
			Totals: engine.Counters{PacketsIn: 1, BytesIn: 100}})
		hs = append(hs, htb.ClassStats{ID: name, Bytes: 100})
	}
	d.Engine.Scheduler = hs
	return control.Stats{Directions: []control.Direction{d}}
}

func scrape(t *testing.T, addr string) (string, int) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// TestScrapeOfAHugeTreeIsBounded: a 25,000-class tree is exported as
// MaxClasses series a direction, the rest summed as "other" (nothing lost
// from the sums), with one warning.
func TestScrapeOfAHugeTreeIsBounded(t *testing.T) {
	const n = 25000
	st := manyClasses(n)
	var mu sync.Mutex
	var warnings []string
	s, err := Serve("127.0.0.1:0", func() control.Stats { return st }, Options{Warn: func(l string) {
		mu.Lock()
		warnings = append(warnings, l)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var body string
	for range 2 {
		var code int
		body, code = scrape(t, s.Addr().String())
		if code != 200 {
			t.Fatalf("scrape: %d", code)
		}
	}
	if len(body) > 2<<20 {
		t.Fatalf("one scrape of a %d-class tree is %d bytes, want under 2 MiB", n, len(body))
	}
	if c := strings.Count(body, "wanlab_proxy_packets_in_total{"); c != MaxClasses {
		t.Fatalf("%d packets_in series, want %d", c, MaxClasses)
	}
	rest := n - (MaxClasses - 1)
	for _, want := range []string{
		fmt.Sprintf(`wanlab_proxy_packets_in_total{class="other",iface="veth-a"} %d`, rest),
		`wanlab_proxy_htb_sent_bytes_total{class="other",iface="veth-a"} ` + strconv.FormatFloat(float64(rest*100), 'g', -1, 64),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "veth-a has 25000 classes") {
		t.Fatalf("warnings %q, want one naming the direction and its classes", warnings)
	}
}

// TestMetricsFloodDoesNotLockOutTheOwner: another user's 150 idle
// connections hold at most its share of the slots; root's scrapes succeed.
func TestMetricsFloodDoesNotLockOutTheOwner(t *testing.T) {
	testenv.RequireRoot(t)
	s, err := Serve("127.0.0.1:0", sample, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fl := testenv.StartAs(t, 65534, "flood "+s.Addr().String()+" 150")
	for i := range 10 {
		if _, code := scrape(t, s.Addr().String()); code != 200 {
			t.Fatalf("root's scrape %d of 10 under the flood: %d", i+1, code)
		}
	}
	if s.Refused() == 0 {
		t.Fatal("no connection of the flood was refused: it did not reach the limit")
	}
	fl.Stop(t)
}

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:9464", false, true},
		{"[::1]:9464", false, true},
		{"10.0.0.1:9464", false, true},
		{"localhost:9464", false, true},
		{"0.0.0.0:9464", false, false},
		{"[::]:9464", false, false},
		{"[]:9464", false, false},
		{":9464", false, false},
		{"0.0.0.0:9464", true, true},
		{"[]:9464", true, true},
		{"9464", false, false},
	} {
		err := CheckAddr(c.addr, c.public)
		if (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, public %v) = %v, want ok %v", c.addr, c.public, err, c.ok)
		}
		if err != nil && c.ok == false && strings.Contains(c.addr, ":9464") && c.addr != "9464" && !strings.Contains(err.Error(), "--metrics-public") {
			t.Errorf("CheckAddr(%q): %v, want the --metrics-public hint", c.addr, err)
		}
	}
}
