package control

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler sends arbitrary methods, paths, credentials and bodies to
// the API: it never panics, a request without the right token is refused
// with 401, a body naming a file is never applied, and a refused request
// leaves the specs as they were.
func FuzzHandler(f *testing.F) {
	const token = "0123456789abcdef"
	for _, seed := range []struct{ method, path, auth, body string }{
		{"GET", "/v1/specs", "Bearer " + token, ""},
		{"PUT", "/v1/specs", "Bearer " + token, "delay 5ms"},
		{"PUT", "/v1/specs/veth-a", "Bearer " + token, "loss 1%"},
		{"PUT", "/v1/specs/veth-a", "Bearer " + token, "@/etc/shadow"},
		{"PUT", "/v1/specs/eth9", "Bearer " + token, "delay 1ms"},
		{"PUT", "/v1/specs", "", "delay 500ms loss 50%"},
		{"PUT", "/v1/specs", "Bearer wrong", "delay 5ms"},
		{"PUT", "/v1/specs", "Basic " + token, "delay 5ms"},
		{"GET", "/v1/stats", "Bearer " + token, ""},
		{"DELETE", "/v1/specs/veth-a", "Bearer " + token, ""},
		{"PUT", "/v1/specs/%2e%2e/x", "Bearer " + token, "delay 1ms"},
		{"PUT", "/v1//specs", "Bearer " + token, "dela 1ms"},
	} {
		f.Add(seed.method, seed.path, seed.auth, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path, auth string, body []byte) {
		fake := newFake()
		before := fmt.Sprint(fake.Specs())
		h := NewHandler(fake, Access{Token: token})
		req, err := http.NewRequest(method, "http://proxy"+path, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		authed := strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")) == token && strings.HasPrefix(auth, "Bearer ")
		if !authed && rec.Code != http.StatusUnauthorized {
			t.Fatalf("%s %q with Authorization %q: %d, want 401", method, path, auth, rec.Code)
		}
		if strings.HasPrefix(strings.TrimSpace(string(body)), "@") && rec.Code == http.StatusOK && method == http.MethodPut {
			t.Fatalf("a file reference was applied: %q", body)
		}
		if rec.Code != http.StatusOK {
			if after := fmt.Sprint(fake.Specs()); after != before || fake.sets != 0 {
				t.Fatalf("%s %q refused with %d but specs changed: %s -> %s", method, path, rec.Code, before, after)
			}
		}
	})
}

// FuzzParseEndpoint: a .control file of any content is refused with an
// error or gives an endpoint a client may dial: a literal loopback address
// or a clean socket path, a pid and a uid in range; it never panics.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{
		`{"address":"127.0.0.1:9901","pid":1234,"start":5678,"uid":0}`,
		`{"address":"[::1]:9901","pid":1,"start":1,"uid":1000}`,
		`{"address":"unix:/run/wanlab/a-b.sock","pid":77,"start":0,"uid":0}`,
		`{"address":"localhost:9901","pid":1,"start":1,"uid":0}`,
		`{"address":"10.0.0.1:9901","pid":1,"start":1,"uid":0}`,
		`{"address":"unix:../x","pid":1,"start":1,"uid":0}`,
		`{"address":"127.0.0.1:9901","pid":-1,"start":1,"uid":0}`,
		`{"address":"127.0.0.1:9901","pid":1,"start":1,"uid":0,"extra":1}`,
		`127.0.0.1:9901`, ``, `{}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ep, err := ParseEndpoint("f", b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := checkLiteral(ep.Address); err != nil {
			t.Fatalf("accepted %q: %v", ep.Address, err)
		}
		if !strings.HasPrefix(ep.Address, unixPrefix) && !IsTCP(ep.Address) {
			t.Fatalf("accepted %q, which Dial would not take as TCP", ep.Address)
		}
		if ep.PID <= 0 || ep.UID < 0 {
			t.Fatalf("accepted pid %d uid %d", ep.PID, ep.UID)
		}
		back, err := ParseEndpoint("f", ep.marshal())
		if err != nil || back != ep {
			t.Fatalf("round trip of %+v: %+v, %v", ep, back, err)
		}
	})
}
