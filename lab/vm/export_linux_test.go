package vm

import "path/filepath"

// UMLProcesses lists the linux.uml processes of a guest's process group.
var UMLProcesses = umlProcesses

// UMLCommandLine is linux.uml's command line for a VM.
var UMLCommandLine = umlCommandLine

// WriteState records a VM's state as Boot does, for Cleanup tests.
func WriteState(dir, id string, pid int, engine Engine, netns string, taps []string, shmDir string) error {
	st := &stateFile{ID: id, PID: pid, Accel: engine, Netns: netns, Taps: taps, ShmDir: shmDir, ControlSock: filepath.Join(dir, "ctl.sock"), dir: dir}
	return st.save()
}

// SweepMemoryDirs is Cleanup's sweep of orphaned memory directories.
var SweepMemoryDirs = sweepMemoryDirs

// PacketInodes reads /proc/net/packet's inodes.
var PacketInodes = packetInodes

// GrowRawSockets raises a UML process's raw sockets' receive buffers.
var GrowRawSockets = growRawSockets

// UMLTapQueue is the txqueuelen of a UML guest's TAP.
const UMLTapQueue = umlTapQueue

// NextUMLCPU is the CPU the next UML guest is pinned to.
var NextUMLCPU = nextUMLCPU
