package hostfile

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Name returns a file name as it is safe to print: unchanged when it is
// valid UTF-8 of printable characters, quoted as %q quotes it otherwise,
// so that a name holding terminal escapes (a capture called
// "\x1b]0;pwned\a.pcap") shows its bytes instead of acting on the
// terminal that prints it.
func Name(path string) string {
	for _, r := range path {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(path)
		}
	}
	return path
}
