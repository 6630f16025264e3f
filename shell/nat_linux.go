package shell

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The shell's NAT is one nftables table of its own per shell,
// "wanlab_shell_<id>" (IPv4): a postrouting chain that masquerades the
// inner subnet's packets leaving through any link but the shell's own, as
// mahimahi's "-t nat -A POSTROUTING -j MASQUERADE" does. A table of its
// own leaves every other table as it was, and deleting it removes all.

// natTablePrefix starts every table a shell makes; Cleanup deletes only
// tables of that shape.
const natTablePrefix = "wanlab_shell_"

func natTableName(id string) string { return natTablePrefix + id }

// ifnameLen is IFNAMSIZ: nftables compares interface names as 16 bytes.
const ifnameLen = 16

// addNAT creates the table in the calling goroutine's namespace (the
// caller's, or one run entered).
func addNAT(id string, inner netip.Prefix, ownLink string) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nat: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: natTableName(id)})
	ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	ifname := make([]byte, ifnameLen)
	copy(ifname, ownLink)
	bits := make([]byte, 4)
	for i := range inner.Bits() {
		bits[i/8] |= 0x80 >> (i % 8)
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		// ip saddr & mask == inner
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: bits, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: inner.Masked().Addr().AsSlice()},
		// oifname != ownLink
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname},
		&expr.Masq{},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nat: table %s: %w", natTableName(id), err)
	}
	return nil
}

// deleteNAT removes the table; one already gone is not an error.
func deleteNAT(id string) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nat: %w", err)
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: natTableName(id)})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nat: delete table %s: %w", natTableName(id), err)
	}
	return nil
}
