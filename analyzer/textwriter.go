package analyzer

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// TextWriter writes WriteText's output for connections handed over one at
// a time (as Options.OnFinish does) before the capture's totals, which
// head the output, are known. The connections go to a spool file, unlinked
// as soon as it is created so that nothing is left behind even after a
// crash, and are copied behind the totals by Close: memory stays bounded
// however many connections the capture holds.
type TextWriter struct {
	w     io.Writer
	spool *os.File
	buf   *bufio.Writer
	b     strings.Builder
	n     int
	err   error
}

// NewTextWriter returns a TextWriter whose spool file is in dir (the
// system's temporary directory if dir is empty).
func NewTextWriter(w io.Writer, dir string) (*TextWriter, error) {
	f, err := os.CreateTemp(dir, "wanlab-analyze-*.txt")
	if err != nil {
		return nil, fmt.Errorf("text output spool: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("text output spool: %w", err)
	}
	return &TextWriter{w: w, spool: f, buf: bufio.NewWriterSize(f, 256<<10)}, nil
}

// Connection spools one connection's text.
func (t *TextWriter) Connection(c *Connection) error {
	if t.err != nil {
		return t.err
	}
	t.b.Reset()
	writeConnText(&t.b, c)
	_, t.err = t.buf.WriteString(t.b.String())
	t.n++
	return t.err
}

// Discard drops what was spooled, writing nothing: for an analysis that
// failed. After Close it does nothing.
func (t *TextWriter) Discard() {
	if t.spool != nil {
		t.spool.Close()
		t.spool = nil
	}
}

// Close writes the totals of r (total connections in the capture, the
// ones spooled shown) and then the spooled connections, and removes the
// spool.
func (t *TextWriter) Close(r *Result, total int) error {
	defer t.Discard()
	if t.err != nil {
		return t.err
	}
	if err := t.buf.Flush(); err != nil {
		return fmt.Errorf("text output spool: %w", err)
	}
	t.b.Reset()
	writeTextHeader(&t.b, r, total, t.n)
	if _, err := io.WriteString(t.w, t.b.String()); err != nil {
		return err
	}
	if _, err := t.spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("text output spool: %w", err)
	}
	if _, err := io.Copy(t.w, t.spool); err != nil {
		return fmt.Errorf("text output spool: %w", err)
	}
	return nil
}
