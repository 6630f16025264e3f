//go:build !linux

package nsrun

func stopProcesses(string) (int, error) { return 0, nil }
