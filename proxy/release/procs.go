package release

import (
	"runtime"
	"sync"
)

// extraProcs adds one P to the scheduler for each running loop whose
// thread holds its P while it sleeps (the raw ppoll waiter), so the rest
// of the program keeps the GOMAXPROCS it asked for. Changes are relative
// (+1 on start, -1 on stop, never below the count at hand), so a
// GOMAXPROCS set by someone else while loops run is kept. Setting
// GOMAXPROCS turns off the runtime's automatic updates from the cgroup
// CPU limit, as any explicit GOMAXPROCS call does.
var extraProcs struct {
	mu sync.Mutex
	n  int // Ps added and not yet removed
}

func addProc() {
	extraProcs.mu.Lock()
	defer extraProcs.mu.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	extraProcs.n++
}

func removeProc() {
	extraProcs.mu.Lock()
	defer extraProcs.mu.Unlock()
	if extraProcs.n == 0 {
		return
	}
	extraProcs.n--
	if cur := runtime.GOMAXPROCS(0); cur > 1 {
		runtime.GOMAXPROCS(cur - 1)
	}
}
