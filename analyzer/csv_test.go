package analyzer

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestWriteCSVAsEncodingCSV checks that the hand-appended rows of
// WriteCSV are what encoding/csv writes for the same fields.
func TestWriteCSVAsEncodingCSV(t *testing.T) {
	for _, name := range []string{"loss", "rwnd", "zerowindow"} {
		res, err := AnalyzeFile(filepath.Join("testdata", name+".pcap"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got, want bytes.Buffer
		if err := WriteCSV(&got, res.Connections); err != nil {
			t.Fatal(err)
		}
		cw := csv.NewWriter(&want)
		cw.Write([]string{"connection", "direction", "series", "unit", "t_s", "bucket_s", "first", "min", "max", "last", "sum", "n", "rate_bps"})
		f := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
		for _, c := range res.Connections {
			for i, d := range c.Directions {
				dir := "client->server"
				if i == 1 {
					dir = "server->client"
				}
				end := time.Duration(c.firstT + int64(c.Duration))
				for _, s := range d.Series.All() {
					for k, p := range s.Points {
						rate := ""
						if s.Unit == "bytes/bucket" {
							rate = f(8 * s.Rate(k, end))
						}
						cw.Write([]string{strconv.Itoa(c.Index), dir, s.Name, s.Unit,
							strconv.FormatFloat(p.T.Seconds(), 'f', 6, 64), strconv.FormatFloat(s.Bucket.Seconds(), 'f', 6, 64),
							f(p.First), f(p.Min), f(p.Max), f(p.Last), f(p.Sum), strconv.Itoa(p.N), rate})
					}
				}
			}
		}
		cw.Flush()
		if got.Len() < 1000 || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: WriteCSV wrote %d bytes, encoding/csv %d, not the same", name, got.Len(), want.Len())
		}
	}
	for _, s := range []string{"a,b", `say "x"`, " lead", "two\nlines", `\.`} {
		var b bytes.Buffer
		cw := csv.NewWriter(&b)
		cw.Write([]string{s})
		cw.Flush()
		if got, want := csvField(s), b.String()[:b.Len()-1]; got != want {
			t.Errorf("csvField(%q) = %q, want %q", s, got, want)
		}
	}
}
