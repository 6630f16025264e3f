package experiment

import (
	"strings"
	"testing"
)

func TestConfigSchedules(t *testing.T) {
	c := Config{Schedule: map[string]string{ToClient: "0s delay 20ms\n10s delay 200ms loss 1%\nloop 20s\n"}}
	s, err := c.Schedules()
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[ToClient] == nil || len(s[ToClient].Steps) != 2 {
		t.Fatalf("schedules %v", s)
	}
	c.Kernel = true
	if _, err := c.Schedules(); err == nil || !strings.Contains(err.Error(), "--kernel") {
		t.Fatalf("kernel with a schedule: %v", err)
	}
	c = Config{Schedule: map[string]string{ToClient: "0s dela 1ms\n"}}
	if _, err := c.Schedules(); err == nil || !strings.HasPrefix(err.Error(), "to-client schedule:1: ") {
		t.Fatalf("bad schedule: %v", err)
	}
}
