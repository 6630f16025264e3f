package device

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// openInNS opens a TUN with backend in a fresh namespace, addressed
// 10.77.0.1/24 and up, so packets to 10.77.0.0/24 are routed into it.
func openInNS(t *testing.T, backend string) (netns.NsHandle, Device) {
	t.Helper()
	_, ns := testenv.NetNS(t)
	d, err := OpenIn(ns, backend, "wltun0", 1500)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			testenv.Skip(t, "%v (needs CAP_NET_ADMIN)", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	err = nsrun.Do(ns, func() error {
		l, err := netlink.LinkByName(d.Name())
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("10.77.0.1/24")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns, d
}

// readUntil reads from d until a UDP packet to port arrives (the kernel
// may send other things, e.g. IPv6 router solicitations, into the TUN).
func readUntil(t *testing.T, d Device, port uint16, want int) [][]byte {
	t.Helper()
	bufs := make([][]byte, d.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 64+d.MTU())
	}
	sizes := make([]int, len(bufs))
	var got [][]byte
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := d.Read(bufs, sizes, 64)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			p := bufs[i][64 : 64+sizes[i]]
			if len(p) >= 28 && p[0]>>4 == 4 && p[9] == unix.IPPROTO_UDP && binary.BigEndian.Uint16(p[22:]) == port {
				got = append(got, append([]byte(nil), p...))
			}
		}
	}
	return got
}

func TestBackendsReadWrite(t *testing.T) {
	for _, backend := range Backends {
		t.Run(backend, func(t *testing.T) {
			ns, d := openInNS(t, backend)
			if backend == Offload && d.BatchSize() < 2 {
				t.Fatalf("offload batch size %d: IFF_VNET_HDR not in effect", d.BatchSize())
			}
			// Kernel -> device: a datagram routed into the TUN.
			var conn *net.UDPConn
			err := nsrun.Do(ns, func() error {
				var err error
				conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 77, 0, 1), Port: 7100})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.WriteToUDP([]byte("to the tun"), &net.UDPAddr{IP: net.IPv4(10, 77, 0, 2), Port: 7200}); err != nil {
				t.Fatal(err)
			}
			got := readUntil(t, d, 7200, 1)
			if len(got) != 1 || string(got[0][28:]) != "to the tun" {
				t.Fatalf("read %q, want the datagram", got)
			}
			// Device -> kernel: turn it around and write it back; the
			// socket must receive it.
			pkt := got[0]
			copy(pkt[12:16], []byte{10, 77, 0, 2})
			copy(pkt[16:20], []byte{10, 77, 0, 1})
			binary.BigEndian.PutUint16(pkt[20:], 7200)
			binary.BigEndian.PutUint16(pkt[22:], 7100)
			binary.BigEndian.PutUint16(pkt[26:], 0) // no UDP checksum (IPv4)
			ipChecksum(pkt)
			buf := make([]byte, 64+len(pkt))
			copy(buf[64:], pkt)
			if n, err := d.Write([][]byte{buf}, 64); err != nil || n != 1 {
				t.Fatalf("Write = %d, %v", n, err)
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			rb := make([]byte, 100)
			n, from, err := conn.ReadFromUDP(rb)
			if err != nil {
				t.Fatal(err)
			}
			if string(rb[:n]) != "to the tun" || from.Port != 7200 {
				t.Fatalf("socket got %q from %v", rb[:n], from)
			}
		})
	}
}

// TestOffloadSplitsGSO sends one UDP GSO super-packet (UDP_SEGMENT) into
// the TUN: the offload backend must return its segments as separate
// packets, each at most the MTU.
func TestOffloadSplitsGSO(t *testing.T) {
	ns, d := openInNS(t, Offload)
	var fd int
	err := nsrun.Do(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{10, 77, 0, 1}}); err != nil {
			return err
		}
		return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 1000)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	payload := make([]byte, 3500)
	if err := unix.Sendto(fd, payload, 0, &unix.SockaddrInet4{Addr: [4]byte{10, 77, 0, 2}, Port: 7300}); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, d, 7300, 4)
	if len(got) != 4 {
		t.Fatalf("read %d segments, want 4", len(got))
	}
	total := 0
	for _, p := range got {
		if len(p) > d.MTU() {
			t.Fatalf("segment of %d bytes exceeds MTU %d", len(p), d.MTU())
		}
		total += len(p) - 28
	}
	if total != len(payload) {
		t.Fatalf("segments carry %d bytes, want %d", total, len(payload))
	}
}

func TestUnknownBackend(t *testing.T) {
	if _, err := Open("tap", "x", 1500); !errors.Is(err, ErrUnknownBackend) {
		t.Fatalf("err = %v, want ErrUnknownBackend", err)
	}
}

func ipChecksum(p []byte) {
	hl := int(p[0]&0xf) * 4
	p[10], p[11] = 0, 0
	var s uint32
	for i := 0; i < hl; i += 2 {
		s += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(s))
}
