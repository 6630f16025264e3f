// Package bytecount counts the bytes that pass through a reader or a
// writer: how far the analyzer has read into a capture, and how large a
// pcapng file the capture and the proxy's tap have written.
package bytecount

import "io"

// Reader counts the bytes read from R in N. Reader and Writer stay two
// types: one value that was both would accept a Read with no R to read.
type Reader struct {
	R io.Reader
	N int64
}

func (c *Reader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}

// Writer counts the bytes that reached W in N.
type Writer struct {
	W io.Writer
	N int64
}

func (c *Writer) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
