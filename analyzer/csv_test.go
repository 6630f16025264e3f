package analyzer

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// csvReference is WriteCSV's output written with encoding/csv and
// strconv, one field at a time.
func csvReference(conns []*Connection) []byte {
	var want bytes.Buffer
	cw := csv.NewWriter(&want)
	cw.Write([]string{"connection", "direction", "series", "unit", "t_s", "bucket_s", "first", "min", "max", "last", "sum", "n", "rate_bps"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
	for _, c := range conns {
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
	return want.Bytes()
}

// TestWriteCSVAsEncodingCSV checks that the hand-appended rows of
// WriteCSV, formatted in windows on several goroutines, are what
// encoding/csv writes for the same fields, in the same order: on the test
// captures, a bulk transfer whose series fill their budget, and
// thousands of short connections (many windows).
func TestWriteCSVAsEncodingCSV(t *testing.T) {
	results := map[string]*Result{}
	for _, name := range []string{"loss", "rwnd", "zerowindow"} {
		res, err := AnalyzeFile(filepath.Join("testdata", name+".pcap"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		results[name] = res
	}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"bulk": func(b *bytes.Buffer) error { _, err := synth.Write(b, bulkConfig(64<<20)); return err },
		"many": func(b *bytes.Buffer) error { _, err := synth.WriteMany(b, synth.ManyConfig{Conns: 3000}); return err },
	} {
		var capture bytes.Buffer
		if err := write(&capture); err != nil {
			t.Fatal(err)
		}
		res, err := AnalyzeStream(&capture, name, Options{})
		if err != nil {
			t.Fatal(err)
		}
		results[name] = res
	}
	for name, res := range results {
		var got bytes.Buffer
		if err := WriteCSV(&got, res.Connections); err != nil {
			t.Fatal(err)
		}
		want := csvReference(res.Connections)
		if got.Len() < 1000 || !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: WriteCSV wrote %d bytes, encoding/csv %d, not the same", name, got.Len(), len(want))
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
