package cpulatency

import (
	"os"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
)

// The real device takes the binary request and drops it on close.
func TestDeviceRequest(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := os.Stat(DevicePath); err != nil {
		testenv.Skip(t, "kernel without CPU latency QoS: %v", err)
	}
	r, err := Open(DevicePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set(0); err != nil {
		t.Fatal(err)
	}
	if !r.Low() {
		t.Error("Set(0) not recorded")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
