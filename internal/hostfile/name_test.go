package hostfile

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"capture.pcap":                 "capture.pcap",
		"/tmp/dir with space/a.pcapng": "/tmp/dir with space/a.pcapng",
		"dépôt/ü.pcap":                 "dépôt/ü.pcap",
		"\x1b]0;pwned\a.pcap":          `"\x1b]0;pwned\a.pcap"`,
		"a\nb.pcap":                    `"a\nb.pcap"`,
		"bad\xffutf8":                  `"bad\xffutf8"`,
		"\u202eright-to-left":          `"\u202eright-to-left"`,
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestPathError(t *testing.T) {
	path := "/nonexistent/\x1b[2J.pcap"
	_, err := os.Open(path)
	got := PathError(path, err)
	if !errors.Is(got, fs.ErrNotExist) || got.Error() != `open "/nonexistent/\x1b[2J.pcap": no such file or directory` {
		t.Errorf("PathError: %v", got)
	}
	if plain := PathError("/nonexistent/a.pcap", err); plain != err {
		t.Errorf("another path's error changed: %v", plain)
	}
}
