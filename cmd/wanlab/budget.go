package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/analyzer"
)

// maxOpenLimit is the largest --max-open-connections taken: at
// analyzer.ConnectionStateBytes each, 10 million open connections are
// about 60 GB, beyond any machine this runs on.
const maxOpenLimit = 10_000_000

// maxPacketsLimit is the largest --max-packets taken: at fit.PacketBytes
// each, 64 Mi packets are about 35 GB.
const maxPacketsLimit = 64 << 20

// maxOpenFlag is --max-open-connections, the analysis's budget of
// connections open at once (analyze, fit).
func maxOpenFlag() cli.Flag {
	return &cli.IntFlag{Name: "max-open-connections", Value: analyzer.DefaultMaxOpen,
		Usage: fmt.Sprintf("analyse at most `N` connections open at once (about %d KB each); past it, those silent longest are finished early, with a warning", analyzer.ConnectionStateBytes>>10)}
}

// maxOpenConnections reads --max-open-connections.
func maxOpenConnections(cc *cli.Context) (int, error) {
	n := cc.Int("max-open-connections")
	if n < 1 || n > maxOpenLimit {
		return 0, fmt.Errorf("--max-open-connections %d: want 1 to %d", n, maxOpenLimit)
	}
	return n, nil
}
