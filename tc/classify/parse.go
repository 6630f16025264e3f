package classify

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// TokenError names the word of a match that is wrong; Index is its
// 0-based position among the words given to ParseMatch.
type TokenError struct {
	Index int
	Token string
	Msg   string
}

func (e *TokenError) Error() string { return e.Msg }

// ParseMatch reads a match from words in wanlab's short vocabulary or in
// the words of tc's u32 and flower filters:
//
//	src PREFIX | dst PREFIX            (also src_ip/dst_ip, flower)
//	protocol tcp|udp|icmp|N            (also ip_proto, flower)
//	sport N[-M] | dport N[-M]          (also src_port/dst_port, flower)
//	dscp N|ef|csN|afXY
//	match ip|ip6 src|dst PREFIX        (u32)
//	match ip sport|dport N 0xffff      (u32; only an exact mask)
//	match ip protocol N 0xff           (u32)
//	match ip tos|dsfield V 0xfc        (u32; the DSCP bits)
//
// An address without a length is a host (/32, /128). Repeating a field
// is an error.
func ParseMatch(words []string) (Match, error) {
	var m Match
	i := 0
	bad := func(j int, format string, a ...any) error {
		tok := ""
		if j < len(words) {
			tok = words[j]
		} else if len(words) > 0 {
			j = len(words) - 1
			tok = words[j]
		}
		return &TokenError{Index: j, Token: tok, Msg: fmt.Sprintf(format, a...)}
	}
	arg := func(what string) (string, error) {
		if i+1 >= len(words) {
			return "", bad(i, "%q needs %s", words[i], what)
		}
		i++
		return words[i], nil
	}
	set := map[string]bool{}
	once := func(field string, at int) error {
		if set[field] {
			return bad(at, "%q: %s given twice", words[at], field)
		}
		set[field] = true
		return nil
	}
	for i < len(words) {
		kw := words[i]
		at := i
		field := kw
		switch kw {
		case "src_ip":
			field = "src"
		case "dst_ip":
			field = "dst"
		case "ip_proto":
			field = "protocol"
		case "src_port":
			field = "sport"
		case "dst_port":
			field = "dport"
		case "match":
			// u32: match ip|ip6 FIELD VALUE [MASK]
			fam, err := arg("ip or ip6")
			if err != nil {
				return m, err
			}
			if fam != "ip" && fam != "ip6" {
				return m, bad(i, "match %q: only ip and ip6 selectors are understood", fam)
			}
			f, err := arg("a field (src, dst, sport, dport, protocol, tos, dsfield)")
			if err != nil {
				return m, err
			}
			at = i
			v, err := arg("a value")
			if err != nil {
				return m, err
			}
			mask := ""
			switch f {
			case "sport", "dport", "protocol", "tos", "dsfield":
				if mask, err = arg("a mask"); err != nil {
					return m, err
				}
			}
			if err := m.setU32(fam, f, v, mask, at, i, once, bad); err != nil {
				return m, err
			}
			i++
			continue
		}
		switch field {
		case "src", "dst", "protocol", "sport", "dport", "dscp":
		default:
			return m, bad(i, "unknown match keyword %q (src, dst, protocol, sport, dport, dscp, or u32's match ip ...)", kw)
		}
		v, err := arg("a value")
		if err != nil {
			return m, err
		}
		if err := once(field, at); err != nil {
			return m, err
		}
		if err := m.setField(field, v, i, bad); err != nil {
			return m, err
		}
		i++
	}
	return m, nil
}

func (m *Match) setField(field, v string, at int, bad func(int, string, ...any) error) error {
	switch field {
	case "src", "dst":
		p, err := parsePrefix(v)
		if err != nil {
			return bad(at, "%s %q: not an address or prefix", field, v)
		}
		if field == "src" {
			m.Src = p
		} else {
			m.Dst = p
		}
	case "protocol":
		if n, ok := protoNames[strings.ToLower(v)]; ok {
			m.Protocol = n
		} else if n, err := strconv.ParseUint(v, 0, 8); err == nil {
			m.Protocol = uint8(n)
		} else {
			return bad(at, "protocol %q: not tcp, udp, icmp, icmpv6, sctp, gre, esp or a number 0-255", v)
		}
		m.HasProtocol = true
	case "sport", "dport":
		r, err := parsePorts(v)
		if err != nil {
			return bad(at, "%s %q: %v", field, v, err)
		}
		if field == "sport" {
			m.SrcPort = r
		} else {
			m.DstPort = r
		}
	case "dscp":
		d, ok := parseDSCP(v)
		if !ok {
			return bad(at, "dscp %q: not 0-63, ef, cs0-cs7 or af11-af43", v)
		}
		m.DSCP, m.HasDSCP = d, true
	}
	return nil
}

func (m *Match) setU32(fam, f, v, mask string, at, last int, once func(string, int) error, bad func(int, string, ...any) error) error {
	wantMask := func(full uint64) error {
		n, err := strconv.ParseUint(mask, 0, 16)
		if err != nil || n != full {
			return bad(last, "match %s %s: mask %q: only the exact mask %#x is understood", fam, f, mask, full)
		}
		return nil
	}
	field := f
	switch f {
	case "src", "dst":
		p, err := parsePrefix(v)
		if err != nil || (fam == "ip") != p.Addr().Is4() {
			return bad(at+1, "match %s %s %q: not an %s prefix", fam, f, v, map[string]string{"ip": "IPv4", "ip6": "IPv6"}[fam])
		}
		if err := once(field, at); err != nil {
			return err
		}
		if f == "src" {
			m.Src = p
		} else {
			m.Dst = p
		}
		return nil
	case "sport", "dport":
		if err := wantMask(0xffff); err != nil {
			return err
		}
	case "protocol":
		if fam == "ip6" {
			return bad(at, "match ip6 protocol: use \"protocol\" (u32 reads only the first next header)")
		}
		if err := wantMask(0xff); err != nil {
			return err
		}
	case "tos", "dsfield":
		field = "dscp"
		if err := wantMask(0xfc); err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 0, 8)
		if err != nil {
			return bad(at+1, "match %s %s %q: not a byte", fam, f, v)
		}
		if err := once(field, at); err != nil {
			return err
		}
		m.DSCP, m.HasDSCP = uint8(n)>>2, true
		return nil
	default:
		return bad(at, "match %s %q: only src, dst, sport, dport, protocol, tos and dsfield are understood", fam, f)
	}
	if err := once(field, at); err != nil {
		return err
	}
	return m.setField(field, v, at+1, bad)
}

func parsePrefix(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return p, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zone not allowed")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePorts(v string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(v, "-")
	a, err := strconv.ParseUint(lo, 10, 16)
	if err != nil {
		return PortRange{}, fmt.Errorf("not a port 0-65535")
	}
	b := a
	if isRange {
		if b, err = strconv.ParseUint(hi, 10, 16); err != nil {
			return PortRange{}, fmt.Errorf("not a port range LO-HI of 0-65535")
		}
		if b < a {
			return PortRange{}, fmt.Errorf("range ends before it starts")
		}
	}
	return PortRange{Lo: uint16(a), Hi: uint16(b), Set: true}, nil
}

// parseDSCP reads a code point as a number or an RFC 2474/2597/3246 name.
func parseDSCP(v string) (uint8, bool) {
	v = strings.ToLower(v)
	if v == "ef" {
		return 46, true
	}
	if len(v) == 3 && strings.HasPrefix(v, "cs") && v[2] >= '0' && v[2] <= '7' {
		return 8 * (v[2] - '0'), true
	}
	if len(v) == 4 && strings.HasPrefix(v, "af") && v[2] >= '1' && v[2] <= '4' && v[3] >= '1' && v[3] <= '3' {
		return 8*(v[2]-'0') + 2*(v[3]-'0'), true
	}
	n, err := strconv.ParseUint(v, 0, 8)
	if err != nil || n > 63 {
		return 0, false
	}
	return uint8(n), true
}
