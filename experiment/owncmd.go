package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
)

// An experiment's traffic can be the user's own programs (Config.ServerCmd
// and ClientCmd): shell command lines run by /bin/sh in the server and the
// client namespace, with the hosts' addresses in the environment
// (WANLAB_SERVER, WANLAB_CLIENT) and WANLAB_CONTROL unset (the proxy of an
// experiment has no control API), in the output directory. Their output
// goes to server.out and client.out there; the client's also to the log.

// shell runs the command lines.
const shell = "/bin/sh"

// serverStopGrace is how long the server command has to exit after
// SIGTERM at the end of the experiment before it is killed.
const serverStopGrace = 5 * time.Second

// CommandResult is how the client command ran.
type CommandResult struct {
	Command  string        `json:"command"`
	ExitCode int           `json:"exit_code"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Output   string        `json:"output"` // the file holding its output
}

// checkOwnCommands refuses own commands where they cannot run.
func (c Config) checkOwnCommands() error {
	if (c.ServerCmd != "" || c.ClientCmd != "") && c.VMs {
		return errors.New("--server-cmd and --client-cmd run in the lab's namespaces, not with --vms")
	}
	return nil
}

// ownCommand is cmdline in a host of the lab, its output to path (and w).
func ownCommand(l *lab.Lab, cmdline, path string, w io.Writer, force bool) (*exec.Cmd, *os.File, error) {
	f, err := hostfile.CreateOutput(path, 0o644, force)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(shell, "-c", cmdline)
	env := []string{"WANLAB_SERVER=" + l.Server.IPv4.String(), "WANLAB_CLIENT=" + l.Client.IPv4.String()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WANLAB_CONTROL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Dir = filepath.Dir(path)
	cmd.Stdout, cmd.Stderr = f, f
	if w != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(f, w), io.MultiWriter(f, w)
	}
	// Its own process group, so the end of the experiment stops what it
	// started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, f, nil
}

// startServerCmd starts cfg.ServerCmd in the server namespace; stop ends
// its process group (SIGTERM, then SIGKILL after serverStopGrace).
func startServerCmd(l *lab.Lab, cfg Config, out string) (stop func() error, err error) {
	cmd, f, err := ownCommand(l, cfg.ServerCmd, filepath.Join(out, "server.out"), nil, cfg.Force)
	if err != nil {
		return nil, fmt.Errorf("--server-cmd: %w", err)
	}
	if err := l.Server.Do(cmd.Start); err != nil {
		f.Close()
		return nil, fmt.Errorf("--server-cmd: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	return func() error {
		defer f.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(serverStopGrace):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		return nil
	}, nil
}

// runClientCmd runs cfg.ClientCmd in the client namespace until it exits
// or ctx ends (the experiment's timeout: then its group is killed).
func runClientCmd(ctx context.Context, l *lab.Lab, cfg Config, out string) (*CommandResult, error) {
	path := filepath.Join(out, "client.out")
	cmd, f, err := ownCommand(l, cfg.ClientCmd, path, cfg.Log, cfg.Force)
	if err != nil {
		return nil, fmt.Errorf("--client-cmd: %w", err)
	}
	defer f.Close()
	start := time.Now()
	if err := l.Client.Do(cmd.Start); err != nil {
		return nil, fmt.Errorf("--client-cmd: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()
	err = cmd.Wait()
	res := &CommandResult{Command: cfg.ClientCmd, Elapsed: time.Since(start), Output: path}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("--client-cmd: %w", ctx.Err())
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("--client-cmd: %w", err)
	}
	return res, nil
}
