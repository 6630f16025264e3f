package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/spec"
)

// A direction's spec may be a class tree; set replaces it whole, changes
// one class of it, or turns it back into a plain spec.
func TestClassesSetAndPatch(t *testing.T) {
	tree := "htb default 2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit; " +
		"class 1:3 parent 1:1 htb rate 50mbit; filter dst 10.0.3.0/24 flowid 1:3"
	p, _ := fakeProxy(t, [2]string{"", tree})
	if got := p.Specs()["eth-b"]; !strings.Contains(got, "class 1:3 parent 1:1 htb rate 50mbit") {
		t.Fatalf("started with %q", got)
	}
	if err := p.SetSpec("eth-b", "class 1:3 parent 1:1 htb rate 60mbit; leaf 1:3 delay 5ms"); err != nil {
		t.Fatal(err)
	}
	got := p.Specs()["eth-b"]
	if !strings.Contains(got, "class 1:3 parent 1:1 htb rate 60mbit") || !strings.Contains(got, "leaf 1:3 delay 5ms") ||
		!strings.Contains(got, "filter dst 10.0.3.0/24 flowid 1:3") {
		t.Fatalf("after a patch: %q", got)
	}
	names := []string{}
	for _, c := range p.Stats().Directions[1].Engine.Classes {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "1:2,1:3" {
		t.Errorf("engine classes %v, want 1:2 (default) and 1:3", names)
	}
	err := p.SetSpec("eth-b", "class 1:3 parent 1:1 htb rate 90mbit")
	if err == nil || !strings.Contains(err.Error(), "children's rates add up to 110mbit") {
		t.Errorf("over-committed change: %v", err)
	}
	if got2 := p.Specs()["eth-b"]; got2 != got {
		t.Errorf("a refused change altered the tree: %q", got2)
	}
	if err := p.SetSpec("eth-b", "delay 10ms"); err != nil {
		t.Fatal(err)
	}
	if got := p.Specs()["eth-b"]; got != "delay 10ms" {
		t.Errorf("back to a plain spec: %q", got)
	}
	if err := p.SetSpec("eth-b", "class 1:1 htb rate 1mbit ceil 1kbit"); err == nil || !strings.Contains(err.Error(), "ceil 1kbit is below rate 1mbit") {
		t.Errorf("bad tree: %v", err)
	}
}

// BenchmarkSetManyClasses is `proxy set` of a 10,000-class tree on a
// running direction as the control API does it: the text parsed once
// (spec.ParseChange) and installed (Install: the htb set-up built and
// swapped in). The target is under a second per set:
//
//	go test -run '^$' -bench SetManyClasses -benchtime 5x ./proxy
func BenchmarkSetManyClasses(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("htb default 2; class 1:1 htb rate 10gbit")
	for i := 2; i < 10002; i++ {
		fmt.Fprintf(&sb, "; class 1:%x parent 1:1 htb rate 1mbit ceil 10gbit", i)
	}
	for i := 2; i < 10002; i++ {
		fmt.Fprintf(&sb, "; filter dst 10.%d.%d.0/24 flowid 1:%x; leaf 1:%x delay 1ms", i/250, i%250, i, i)
	}
	text := sb.String()
	fa, fb := device.NewFake("fa", 1500, 8, 256), device.NewFake("fb", 1500, 8, 256)
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{Ifaces: [2]string{"eth-a", "eth-b"}, Seed: 1, HasSeed: true})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch, err := spec.ParseChange(text)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Install("eth-b", ch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n := len(p.Stats().Directions[1].Engine.Classes); n != 10000 {
		b.Fatalf("%d engine classes, want 10000", n)
	}
}
