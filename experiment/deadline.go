package experiment

import (
	"errors"
	"fmt"
	"time"

	"github.com/wanlab/wanlab/fit"
)

// A reproduction's overall deadline: each lab run is given
// likeRunSetup (building the lab, starting the captures, analysing
// them, removing the lab: 10-20 s measured) plus likeSlowdown times the
// original connection's duration (a reproduction runs it again, at most
// this much slower before something is wrong), and the whole gets one
// run more than asked for (the calibration run).
const (
	likeRunSetup = time.Minute
	likeSlowdown = 10
)

// ErrLikeDeadline is matched (errors.Is) by the error of a reproduction
// that passed its deadline; the lab is removed as after any error.
var ErrLikeDeadline = errors.New("the reproduction's deadline passed")

// LikeDeadline is the time a reproduction of f with runs lab runs (the
// reproductions and the tries) is given.
func LikeDeadline(f *fit.Result, runs int) time.Duration {
	perRun := likeRunSetup + likeSlowdown*fittedDuration(f)
	return time.Duration(runs+1) * perRun
}

// fittedDuration is how long the fitted connection lasted.
func fittedDuration(f *fit.Result) time.Duration {
	return time.Duration(f.Connection.DurationMs * float64(time.Millisecond))
}

// likeDeadlineError is the cause a reproduction's context ends with at
// its deadline: it says the deadline, where it came from, and the flag.
type likeDeadlineError struct {
	deadline, original time.Duration
	flag               bool // --deadline set it
}

func (e likeDeadlineError) Error() string {
	if e.flag {
		return fmt.Sprintf("%v: the --deadline %v passed", ErrLikeDeadline, e.deadline)
	}
	return fmt.Sprintf("%v: %v, from the original's %v (--deadline raises it)", ErrLikeDeadline, e.deadline, e.original.Round(time.Millisecond))
}

func (e likeDeadlineError) Unwrap() error { return ErrLikeDeadline }
