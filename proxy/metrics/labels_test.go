package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"lab=berlin,link=r1-r2", "node=wanlab-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["lab"] != "berlin" || got["link"] != "r1-r2" || got["node"] != "wanlab-1" {
		t.Errorf("got %v", got)
	}
	if l, err := ParseLabels(nil); err != nil || l != nil {
		t.Errorf("no labels: %v, %v", l, err)
	}
	for _, c := range []struct{ in, want string }{
		{"lab", `"lab": want NAME=VALUE`},
		{"9lab=x", `"9lab" is not a Prometheus label name`},
		{"__lab=x", `"__lab" is not a Prometheus label name`},
		{"iface=x", `"iface" is a label of the proxy's own metrics`},
		{"lab=a,lab=b", "lab given twice"},
		{"lab=\xff", "not valid UTF-8"},
	} {
		_, err := ParseLabels([]string{c.in})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

// TestServeLabels checks that the constant labels reach every metric: the
// proxy's own, and the Go and process collectors'.
func TestServeLabels(t *testing.T) {
	labels, err := ParseLabels([]string{"lab=l1,link=a-b"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Serve("127.0.0.1:0", sample, Options{Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if !strings.Contains(line, `lab="l1"`) || !strings.Contains(line, `link="a-b"`) {
			t.Errorf("a metric without the labels: %s", line)
		}
	}
	for _, want := range []string{
		`wanlab_proxy_packets_out_total{class="default",iface="veth-a",lab="l1",link="a-b"} 990`,
		`go_goroutines{lab="l1",link="a-b"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if n < 20 {
		t.Errorf("only %d metrics", n)
	}
}

func FuzzParseLabels(f *testing.F) {
	f.Add("lab=berlin,link=r1-r2")
	f.Add("a=,b==c, c = d")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLabels([]string{s})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: error of several lines: %v", s, err)
			}
			return
		}
		for name := range l {
			if reserved[name] || name == "" {
				t.Fatalf("%q: label %q accepted", s, name)
			}
		}
	})
}
