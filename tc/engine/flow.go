package engine

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/units"
)

// Flow is one synthetic flow of Simulate: constant-rate packets to Dst.
type Flow struct {
	Src, Dst netip.Addr
	Protocol uint8 // 17 (udp) or 6 (tcp): only the header, no congestion control
	SPort    uint16
	DPort    uint16
	DSCP     uint8
	Rate     units.Rate
	Size     int           // IP length, 0: 1500
	Start    time.Duration // offset from the start of the run
	Stop     time.Duration // 0: the end of the run
}

// ParseFlow reads "dst=10.0.2.1,rate=50mbit[,src=A][,proto=udp|tcp]
// [,sport=N][,dport=N][,dscp=N][,size=BYTES][,start=1s][,stop=3s]".
func ParseFlow(s string) (Flow, error) {
	f := Flow{Protocol: 17, SPort: 40000, DPort: 9, Size: 1500}
	set := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return f, fmt.Errorf("flow %q: %q: want KEY=VALUE", s, kv)
		}
		set[k] = true
		var err error
		switch k {
		case "dst", "src":
			var a netip.Addr
			if a, err = netip.ParseAddr(v); err == nil && a.Zone() != "" {
				err = fmt.Errorf("zone not allowed")
			}
			if k == "dst" {
				f.Dst = a
			} else {
				f.Src = a
			}
		case "rate":
			f.Rate, err = units.ParseRate(v)
		case "proto":
			switch v {
			case "udp":
				f.Protocol = 17
			case "tcp":
				f.Protocol = 6
			default:
				err = fmt.Errorf("want udp or tcp")
			}
		case "sport", "dport":
			var n uint64
			if n, err = strconv.ParseUint(v, 10, 16); err == nil {
				if k == "sport" {
					f.SPort = uint16(n)
				} else {
					f.DPort = uint16(n)
				}
			}
		case "dscp":
			var n uint64
			if n, err = strconv.ParseUint(v, 10, 8); err == nil && n > 63 {
				err = fmt.Errorf("must be 0-63")
			}
			f.DSCP = uint8(n)
		case "size":
			f.Size, err = strconv.Atoi(v)
			if err == nil && (f.Size < 48 || f.Size > 65535) {
				err = fmt.Errorf("must be 48-65535 bytes")
			}
		case "start", "stop":
			var d time.Duration
			if d, err = units.ParseTime(v, time.Second); err == nil && d < 0 {
				err = fmt.Errorf("negative")
			}
			if k == "start" {
				f.Start = d
			} else {
				f.Stop = d
			}
		default:
			return f, fmt.Errorf("flow %q: unknown key %q (dst, src, rate, proto, sport, dport, dscp, size, start, stop)", s, k)
		}
		if err != nil {
			return f, fmt.Errorf("flow %q: %s %q: %w", s, k, v, err)
		}
	}
	if !set["dst"] || !set["rate"] || f.Rate == 0 {
		return f, fmt.Errorf("flow %q: needs dst=ADDRESS and rate=RATE", s)
	}
	if !f.Src.IsValid() {
		f.Src = netip.MustParseAddr("10.0.0.1")
		if f.Dst.Is6() {
			f.Src = netip.MustParseAddr("fd00::1")
		}
	}
	if f.Src.Is4() != f.Dst.Is4() {
		return f, fmt.Errorf("flow %q: src and dst of different families", s)
	}
	if f.Stop != 0 && f.Stop <= f.Start {
		return f, fmt.Errorf("flow %q: stop %s is not after start %s", s, f.Stop, f.Start)
	}
	return f, nil
}

// String prints the flow as ParseFlow reads it.
func (f Flow) String() string {
	proto := "udp"
	if f.Protocol == 6 {
		proto = "tcp"
	}
	s := fmt.Sprintf("dst=%s,rate=%s,proto=%s,dport=%d,size=%d", f.Dst, f.Rate, proto, f.DPort, f.Size)
	if f.Start != 0 {
		s += ",start=" + units.FormatDuration(f.Start)
	}
	if f.Stop != 0 {
		s += ",stop=" + units.FormatDuration(f.Stop)
	}
	return s
}

// packet builds f's packet (IPv4 or IPv6 with a UDP/TCP-sized header).
func (f Flow) packet() []byte {
	size := max(f.Size, 48)
	b := make([]byte, size)
	var off int
	if f.Dst.Is4() {
		b[0], b[1] = 0x45, f.DSCP<<2
		binary.BigEndian.PutUint16(b[2:], uint16(size))
		b[8], b[9] = 64, f.Protocol
		s, d := f.Src.As4(), f.Dst.As4()
		copy(b[12:], s[:])
		copy(b[16:], d[:])
		off = 20
	} else {
		b[0], b[1] = 0x60|f.DSCP>>2, f.DSCP<<6
		binary.BigEndian.PutUint16(b[4:], uint16(size-40))
		b[6], b[7] = f.Protocol, 64
		s, d := f.Src.As16(), f.Dst.As16()
		copy(b[8:], s[:])
		copy(b[24:], d[:])
		off = 40
	}
	binary.BigEndian.PutUint16(b[off:], f.SPort)
	binary.BigEndian.PutUint16(b[off+2:], f.DPort)
	return b
}
