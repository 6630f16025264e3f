package experiment

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
)

// TestOwnCommandsAreTheTraffic runs iperf3 -s and iperf3 -c -R as the
// experiment's server and client through tbf rate 20mbit: the client's
// exit status and output are kept, the captures and the analyzer see its
// connection, and the rate iperf3 reports is the bucket's.
func TestOwnCommandsAreTheTraffic(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "iperf3")
	cfg := Config{Out: t.TempDir(), Force: true,
		Impair: map[string]string{ToClient: "delay 10ms | tbf rate 20mbit burst 32kb limit 200kb", ToServer: "delay 10ms"},
		// The server needs a moment to listen: the client retries
		// while the connection is refused, within the experiment's
		// timeout; it runs in the output directory.
		ServerCmd: "exec iperf3 -s",
		ClientCmd: `until iperf3 -c "$WANLAB_SERVER" -R -t 4 -O 1 -J > iperf3.json 2>/dev/null; do test -s iperf3.json && grep -q '"error"' iperf3.json && ! grep -q 'connect' iperf3.json && exit 1; done; cat iperf3.json`,
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertTornDown(t, res.LabID)
	if res.ClientCmd == nil || res.ClientCmd.ExitCode != 0 {
		t.Fatalf("client command: %+v", res.ClientCmd)
	}
	out, err := os.ReadFile(res.ClientCmd.Output)
	if err != nil {
		t.Fatal(err)
	}
	var ip struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &ip); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	got := ip.End.SumReceived.BitsPerSecond
	t.Logf("iperf3 -R as the experiment's client: %.2f Mbit/s", got/1e6)
	if got == 0 {
		t.Fatalf("no rate in the client's output:\n%s", out)
	}
	// That the commands are the traffic, not how exact the shaping is
	// (the shell's test holds that to 5 %): a tenth.
	if got < 18e6 || got > 21e6 {
		t.Errorf("iperf3 -R through tbf rate 20mbit: %.2f Mbit/s, want 18 to 21", got/1e6)
	}
	for _, side := range []string{SideClient, SideServer} {
		found := false
		for _, c := range res.Captures[side].Connections {
			found = found || c.Server.Port() == 5201
		}
		if !found {
			t.Errorf("%s capture: no connection to iperf3's port 5201 among %d", side, len(res.Captures[side].Connections))
		}
	}
	if !strings.Contains(string(mustRead(t, res.Out+"/server.out")), "Server listening") {
		t.Error("server.out does not hold iperf3 -s's output")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
