package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/engine"
)

func TestWriteHTBStats(t *testing.T) {
	st := []engine.TreeClass{{ID: "1:1", Bytes: 3 << 20, LentBytes: 1 << 20, Mode: "can_send"},
		{ID: "1:2", Parent: "1:1", Leaf: true, Bytes: 3 << 20, BorrowedBytes: 1 << 20, QueuePackets: 5, DroppedQueue: 2, Mode: "may_borrow"}}
	// In process and after a JSON round trip (the control API) alike.
	b, _ := json.Marshal(st)
	var decoded []engine.TreeClass
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]engine.TreeClass{st, decoded} {
		var out bytes.Buffer
		if err := writeHTBStats(&out, v); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"htb tree:", "1:2     1:1  3 MiB     1 MiB    0 B       5        2", "may_borrow"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%T: output lacks %q:\n%s", v, want, out.String())
			}
		}
	}
	var out bytes.Buffer
	writeHTBStats(&out, nil)
	if out.Len() != 0 {
		t.Errorf("no tree printed %q", out.String())
	}
}
