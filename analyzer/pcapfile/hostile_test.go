package pcapfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapngWithInterfaces writes a pcapng of n interface descriptions and a
// frame on the last one, in byte order order (pcapgo writes little-endian;
// a big-endian file is built by hand).
func pcapngWithInterfaces(t *testing.T, n int, order binary.ByteOrder) []byte {
	t.Helper()
	if order == binary.LittleEndian {
		var buf bytes.Buffer
		w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{LinkType: layers.LinkTypeRaw, SnapLength: 96}, pcapgo.NgWriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last := 0
		for range n - 1 {
			if last, err = w.AddInterface(pcapgo.NgInterface{LinkType: layers.LinkTypeRaw, SnapLength: 96}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: t0, CaptureLength: 2, Length: 60, InterfaceIndex: last}, []byte{1, 2}); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		return buf.Bytes()
	}
	be := binary.BigEndian
	var b []byte
	block := func(typ uint32, body []byte) {
		size := uint32(12 + len(body))
		b = be.AppendUint32(b, typ)
		b = be.AppendUint32(b, size)
		b = append(b, body...)
		b = be.AppendUint32(b, size)
	}
	shb := be.AppendUint32(nil, ngByteOrderMagic)
	shb = be.AppendUint16(shb, 1)
	shb = be.AppendUint16(shb, 0)
	shb = be.AppendUint64(shb, ^uint64(0))
	block(ngSectionHeader, shb)
	idb := be.AppendUint16(nil, uint16(layers.LinkTypeRaw))
	idb = be.AppendUint16(idb, 0)
	idb = be.AppendUint32(idb, 96)
	for range n {
		block(ngInterfaceDesc, idb)
	}
	epb := be.AppendUint32(nil, uint32(n-1))
	epb = be.AppendUint64(epb, 0)
	epb = be.AppendUint32(epb, 4)
	epb = be.AppendUint32(epb, 60)
	epb = append(epb, 1, 2, 3, 4)
	block(6, epb)
	return b
}

// TestPcapngInterfacesBounded: a pcapng with MaxInterfaces descriptions
// is read, one with more is refused with ErrTooManyInterfaces before
// pcapgo keeps them, in either byte order and inside gzip.
func TestPcapngInterfacesBounded(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		frames, err := readAll(t, pcapngWithInterfaces(t, MaxInterfaces, order))
		if err != nil || len(frames) != 1 || frames[0].Interface != MaxInterfaces-1 {
			t.Errorf("%v, %d interfaces: %d frames, %v", order, MaxInterfaces, len(frames), err)
		}
		over := pcapngWithInterfaces(t, MaxInterfaces+1, order)
		if frames, err := readAll(t, over); !errors.Is(err, ErrTooManyInterfaces) || len(frames) != 0 {
			t.Errorf("%v, %d interfaces: %d frames, %v", order, MaxInterfaces+1, len(frames), err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(over)
		zw.Close()
		if _, err := readAll(t, gz.Bytes()); !errors.Is(err, ErrTooManyInterfaces) {
			t.Errorf("%v, gzip'd, %d interfaces: %v", order, MaxInterfaces+1, err)
		}
	}
}

// TestBadMagicEchoesNothing: the error for a file that is no capture
// names the file, never its bytes (as root, a link to /etc/shadow would
// print "root" as hex), and a name with control characters is quoted.
func TestBadMagicEchoesNothing(t *testing.T) {
	_, err := NewReader(strings.NewReader("root:$y$j9T$secret:20000:0:99999:7:::\n"), "\x1b]0;owned\a.pcap")
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("err %v", err)
	}
	msg := err.Error()
	for _, leak := range []string{"726f6f74", "746f6f72", "root", "secret", "\x1b", "\a"} {
		if strings.Contains(msg, leak) {
			t.Errorf("error %q holds %q", msg, leak)
		}
	}
	if !strings.HasPrefix(msg, `"\x1b]0;owned\a.pcap": `) {
		t.Errorf("error %q does not start with the quoted name", msg)
	}
}
