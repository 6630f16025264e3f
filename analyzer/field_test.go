package analyzer

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// fieldDir holds public captures of real transfers that other people
// made (../shared/captures/field, beside the clone in CI; its README
// names each file's source).
const fieldDir = "../../shared/captures/field"

// fieldReading is an expert's reading of one field capture's main
// transfer (its largest connection, the direction that carried the most
// data), established with tshark and the rounds of its time-sequence
// graph: where the capture was taken, the handshake's round trip timed
// from the last SYN, and the limit, or the set of limits the capture
// leaves open.
type fieldReading struct {
	file   string
	near   string   // captured near the data's sender, receiver, or "unknown" (a LAN)
	hsMs   float64  // the handshake RTT, Karn-timed
	limits []string // any of these is right; every other limit contradicts the capture
	why    string
}

// fieldPeriods are, for some field captures, the limits of the main
// transfer's periods in order (Diagnosis.Limits).
var fieldPeriods = map[string][]string{
	// The window opened for 12 round trips, then met the unscaled 64 KiB
	// window for the last 5.
	"zeek-ftp-with-numbers-in-filename.pcap": {LimitSlowStart, LimitReceiveWindow},
	// A response over before slow start ended: one limit, no periods.
	"sv-http-aptget-ids-02-s2.pcap": nil,
}

var fieldReadings = []fieldReading{
	{"ja4-http2-with-cookies.pcapng", "receiver", 89.8, []string{LimitApplication},
		"HTTP/2 page load at the client (SYN-ACK 89.7 ms after the SYN, ACK 0.1 ms after it): the server idled 55 % of the transfer between responses"},
	{"ja4-ssh-scp-1050.pcap", "unknown", 0.4, []string{LimitApplication},
		"SCP on a LAN (0.4 ms handshake): 1 MB over 47 s, the sender idle 99 % of it, waiting on its user and ssh"},
	{"joy-firefox58.pcap", "receiver", 10.3, []string{LimitSlowStart, LimitDelayedAck, LimitApplication},
		"a 0.23 s HTTPS response at the client, over 22 round trips whose rounds still grew: slow start and the ends' pauses, never a buffer"},
	{"mercury-surfshark.pcap", "receiver", 15.8, []string{LimitApplication},
		"behind VirtualBox's NAT (10.0.2.16), whose relay ACKs in 0.3 ms: 271 round trips without loss whose rounds neither grew nor held flat, the relay handing data over as it came"},
	{"ndpi-443-firefox.pcap", "receiver", 38.6, []string{LimitApplication},
		"HTTPS at the client: the server sent nothing for 92 % of the transfer"},
	{"ndpi-bot.pcap", "sender", 106.5, []string{LimitReceiveWindow},
		"at the server (SYN-ACK 0.4 ms after the SYN): Bingbot's 64240-byte window without scaling, reached in round 5 (63 KB) and held for 5 rounds"},
	{"ndpi-whatsappfiles.pcap", "receiver", 61.0, []string{LimitLoss, LimitApplication},
		"media at the client: idle 89 % of the time, and 0.6 % re-sent with a busy rate near the Mathis bound"},
	{"sv-http-aptget-ids-02-s2.pcap", "receiver", 14.2, []string{LimitSlowStart},
		"an apt download at the client: 255 KiB in 6 rounds of 14, 28, 37, 48 and 82 KB, the window far larger: over before slow start ended"},
	{"sv-http-body-hook-01.pcap", "receiver", 15.0, []string{LimitLoss, LimitBandwidth},
		"IPv6 HTTP at the client: 0.2 % re-sent, a standing queue of 17 ms at the median, the rate near the Mathis bound"},
	{"sv-http-mime-truncated.pcap", "receiver", 98.7, []string{LimitApplication, LimitLoss},
		"a download at the sandbox: the server idle 56 % of the transfer; while busy 9.6 Mbit/s, above the 0.3 % loss's Mathis bound"},
	{"sv-mime-stream-depth.pcap", "sender", 110.8, []string{LimitApplication, LimitReceiveWindow},
		"an SMTP upload at its sender (SYN-ACK 110.5 ms after the SYN, ACK 0.2 ms after it), ACKed in 0.1 ms by a relay that closed its window 15 times: the receiving end drained at 5 Mbit/s"},
	{"sv-smb2-async-read.pcap", "unknown", 0.5, []string{LimitApplication},
		"an SMB2 read on a LAN: 3 MB in 37 ms, far below the 2.9 MB window, in answers to 11 read requests; between them the server waited 37 % of the time for the next"},
	{"sv-tor_bl.pcap", "receiver", 22.8, []string{LimitSendBuffer, LimitApplication, LimitUnknown},
		"Tor at the client: 720 KiB in 0.55 s (the FIN came 18 s later), rounds flat at about 50 KB for 11 round trips under a 642 KiB window without loss: the relay's own pacing or its buffer, not a bottleneck (its packet pairs show 49.5 Mbit/s)"},
	{"zeek-206_example_a.pcap", "sender", 370.2, []string{LimitLoss},
		"at the server: the client's SYN was sent twice 3 s apart (the handshake is 370 ms from the second); 12 of 376 segments re-sent with flights of 5-16 KB under a 64 KiB window: loss held the window"},
	{"zeek-206_example_b.pcap", "receiver", 72.4, []string{LimitLoss},
		"a Windows Update range at the client: 13 % of the segments sent again"},
	{"zeek-206_example_c.pcap", "sender", 45.0, []string{LimitLoss, LimitApplication},
		"multipart byte ranges at the server (ACK 44.3 ms after the SYN-ACK): 1.7 % re-sent, and idle between the parts"},
	{"zeek-bro.org.pcap", "receiver", 75.7, []string{LimitApplication},
		"a keep-alive page load behind VirtualBox's NAT: responses separated by the browser's next requests"},
	{"zeek-ftp-with-numbers-in-filename.pcap", "receiver", 43.5, []string{LimitCongestion, LimitReceiveWindow, LimitSlowStart},
		"FTP data at the client: rounds of 4, 4, 8, 11, 15 ... 63 KB, the window opening until it met the unscaled 64 KiB window in the last 3 rounds"},
	{"zeek-m57-long-49583-80.pcap", "receiver", 96.5, []string{LimitDelayedAck, LimitApplication, LimitSlowStart},
		"a Windows Update range at the client: rounds of 11, 8, 9 KB, then 2-3 silent rounds (a 200 ms delayed ACK), then the window opening again"},
	{"zeek-no_crlf.pcap", "receiver", 347.2, []string{LimitSendBuffer, LimitApplication, LimitUnknown},
		"a download at the sandbox: rounds flat at exactly 64 KiB for 7 round trips under a 256 KiB window, nothing lost: the sender's 64 KiB (its buffer or its writes)"},
	{"zeek-smb2.pcap", "unknown", 0.3, []string{LimitApplication, LimitUnknown},
		"an SMB2 write on a LAN: the client idle 62 % of it between writes"},
	{"zeek-ssh.pcap", "receiver", 38.1, []string{LimitDelayedAck, LimitApplication, LimitCongestion, LimitSlowStart},
		"git over SSH at the client: small rounds under a 74 KiB window, the pack streamed as git produced it"},
}

// exponent matches a number written with an exponent (1e+03, 4.18e-05).
var exponent = regexp.MustCompile(`[0-9]e[+-][0-9]`)

// TestFieldCaptures reads every field capture: the main transfer's side,
// handshake RTT and limit are the expert's, and no text carries an
// exponent.
func TestFieldCaptures(t *testing.T) {
	entries, err := os.ReadDir(fieldDir)
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("WANLAB_REQUIRE_PRIVILEGED") != "" {
			t.Fatalf("the field captures (%s): %v", fieldDir, err)
		}
		t.Skipf("the field captures are not beside the clone: %v", err)
	}
	var files []string
	for _, e := range entries {
		if n := e.Name(); filepath.Ext(n) == ".pcap" || filepath.Ext(n) == ".pcapng" {
			files = append(files, n)
		}
	}
	for _, r := range fieldReadings {
		files = slices.DeleteFunc(files, func(f string) bool { return f == r.file })
		t.Run(r.file, func(t *testing.T) {
			res, err := AnalyzeFile(filepath.Join(fieldDir, r.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var c *Connection
			for _, x := range res.Connections {
				if c == nil || x.UniqueBytes() > c.UniqueBytes() {
					c = x
				}
			}
			d := c.Directions[0]
			if c.Directions[1].UniqueBytes > d.UniqueBytes {
				d = c.Directions[1]
			}
			if d.CapturedNear != r.near {
				t.Errorf("captured near %q (from %s: %.1f ms to the receiver, %.1f to the sender), want %q: %s",
					d.CapturedNear, d.CapturedNearFrom, d.CaptureToReceiverMs, d.CaptureToSenderMs, r.near, r.why)
			}
			if tol := max(r.hsMs*0.02, 0.05); c.HandshakeRTTMs < r.hsMs-tol || c.HandshakeRTTMs > r.hsMs+tol {
				t.Errorf("handshake RTT %.1f ms, want %.1f", c.HandshakeRTTMs, r.hsMs)
			}
			if dg := d.Diagnosis; dg == nil || !slices.Contains(r.limits, dg.Limit) {
				t.Errorf("limit %v, want one of %v: %s", dg, r.limits, r.why)
			}
			if want, ok := fieldPeriods[r.file]; ok && d.Diagnosis != nil {
				var got []string
				for _, p := range d.Diagnosis.Limits {
					got = append(got, p.Limit)
				}
				if !slices.Equal(got, want) {
					t.Errorf("periods %+v, want %v", d.Diagnosis.Limits, want)
				}
			}
			if (d.PathRTTMs == 0 || d.PathRTTP50Ms == 0) && d.RTTSamples > 0 {
				t.Errorf("path RTT %.3g ms, median %.3g ms with %d samples", d.PathRTTMs, d.PathRTTP50Ms, d.RTTSamples)
			}
			var b bytes.Buffer
			if err := WriteText(&b, res, res.Connections); err != nil {
				t.Fatal(err)
			}
			if m := exponent.Find(b.Bytes()); m != nil {
				i := bytes.Index(b.Bytes(), m)
				t.Errorf("text output has an exponent: %q", b.Bytes()[max(0, i-60):min(b.Len(), i+20)])
			}
		})
	}
	if len(files) > 0 {
		t.Errorf("field captures without a reading: %v", files)
	}
}
