package engine

import "testing"

// drainDropper holds every packet and, when drained, drops them all, as
// an htb leaf's AQM may while a Replace empties the old tree.
type drainDropper struct {
	held    []*Packet
	classes []int
	drop    func(*Packet, int, DropReason)
}

func (s *drainDropper) Enqueue(class int, p *Packet, now int64) bool {
	s.held, s.classes = append(s.held, p), append(s.classes, class)
	return true
}
func (s *drainDropper) Next() (int64, bool)                      { return 0, false }
func (s *drainDropper) Dequeue(int64) (*Packet, int, bool)       { return nil, 0, false }
func (s *drainDropper) SetDrop(f func(*Packet, int, DropReason)) { s.drop = f }
func (s *drainDropper) Drain(func(*Packet, int)) {
	for i, p := range s.held {
		s.drop(p, s.classes[i], DropAQM)
	}
	s.held, s.classes = nil, nil
}

// A drop by the old scheduler while Replace drains it is its class's, in
// the old tree: the new classes, whose indexes are the same, start clean.
func TestReplaceBooksDrainDropsOnOldClasses(t *testing.T) {
	old := &drainDropper{}
	pl, err := NewPipeline(nil, Options{
		Classes:    []ClassSpec{{Name: "a", Spec: mustParse(t, "")}, {Name: "b", Spec: mustParse(t, "")}},
		Classifier: portClassifier{},
		Scheduler:  old,
	})
	if err != nil {
		t.Fatal(err)
	}
	now := 1000 * msec
	for range 5 {
		pl.Enqueue(&Packet{Data: udpPacket(100), Arrival: now}, now) // port 9: class b
	}
	pl.Dequeue(now, nil)
	if len(old.held) != 5 {
		t.Fatalf("the scheduler holds %d packets, want 5", len(old.held))
	}
	classes := []ClassSpec{{Name: "c", Spec: mustParse(t, "")}, {Name: "d", Spec: mustParse(t, "")}}
	if err := pl.Replace(classes, portClassifier{}, &drainDropper{}, now+msec); err != nil {
		t.Fatal(err)
	}
	snap := pl.Snapshot()
	if snap.Totals.Drops.AQM != 5 {
		t.Errorf("pipeline AQM drops %d, want 5", snap.Totals.Drops.AQM)
	}
	for _, c := range snap.Classes {
		if c.Totals.Drops.Total() != 0 {
			t.Errorf("new class %s has drops %+v: the old tree's drain was booked on it", c.Name, c.Totals.Drops)
		}
	}
}
