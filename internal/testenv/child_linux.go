package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Another local user's side of the security tests: a copy of the test
// binary run at another uid that listens where a server does not (squat)
// or holds connections to a server (flood) until told to stop, then says
// what it saw. A package that uses StartAs calls RunChildIfAsked first
// thing in its TestMain.
const childEnv = "WANLAB_TESTENV_CHILD"

// RunChildIfAsked runs the child mode StartAs asked for and exits; in the
// test process itself it returns at once.
func RunChildIfAsked() {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	f := strings.Fields(mode)
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	switch {
	case len(f) == 2 && f[0] == "squat":
		squat(f[1], done)
	case len(f) == 3 && f[0] == "flood":
		n, _ := strconv.Atoi(f[2])
		flood(f[1], n, done)
	default:
		fmt.Println("bad child mode", mode)
		os.Exit(1)
	}
	os.Exit(0)
}

// squat listens on addr and counts the connections and bytes that arrive.
func squat(addr string, done <-chan struct{}) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var conns, bytes atomic.Int64
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				n, _ := io.Copy(io.Discard, c)
				bytes.Add(n)
				<-done
			}()
		}
	}()
	fmt.Println("ready")
	<-done
	l.Close()
	wg.Wait()
	fmt.Println("conns", conns.Load(), "bytes", bytes.Load())
}

// flood holds n idle connections to addr, dialling again whenever the
// server closes one.
func flood(addr string, n int, done <-chan struct{}) {
	var dials atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, time.Second)
				dials.Add(1)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				stop := make(chan struct{})
				go func() {
					select {
					case <-done:
					case <-stop:
					}
					c.Close()
				}()
				c.Read(make([]byte, 1)) // until the server (or done) closes it
				close(stop)
			}
		}()
	}
	for dials.Load() < int64(n) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("ready")
	<-done
	wg.Wait()
	fmt.Println("dials", dials.Load())
}

// Child is a RunChildIfAsked process running as another user.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// ChildCommand is a command running a copy of this test binary (in a
// directory every user may read, removed at the test's end) as uid and
// gid with the supplementary groups given (none when nil), in /, with
// only env and HOME=/ in its environment, running the tests that match
// run: the way the security tests become another local user.
func ChildCommand(t testing.TB, uid, gid int, groups []uint32, run string, env ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "wanlab-child-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "child.test")
	in, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, in, 0o755); err != nil {
		t.Fatal(err)
	}
	if groups == nil {
		groups = []uint32{}
	}
	cmd := exec.Command(bin, "-test.run="+run)
	cmd.Env = append([]string{"HOME=/"}, env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	return cmd
}

// StartAs runs mode ("squat ADDR" or "flood ADDR N") as uid (and gid uid,
// no supplementary groups) and returns once the child is ready. It is
// stopped and waited for at the test's end.
func StartAs(t testing.TB, uid int, mode string) *Child {
	t.Helper()
	cmd := ChildCommand(t, uid, uid, nil, "^$", childEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if l := c.line(t); l != "ready" {
		t.Fatalf("child %q as uid %d: %q", mode, uid, l)
	}
	return c
}

func (c *Child) line(t testing.TB) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("child exited without a word")
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("child said nothing within 30 s")
	}
	return ""
}

// Stop tells the child to stop and returns its last line: "conns N bytes
// M" for squat, "dials N" for flood.
func (c *Child) Stop(t testing.TB) string {
	t.Helper()
	c.stdin.Close()
	return c.line(t)
}
