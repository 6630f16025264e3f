package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
)

// The files root writes and reads for a user, against another local user
// (uid 65534) who plants links and files in a directory both can write
// to, as /tmp is.

const nobody = 65534

// fileChildEnv carries the operations the child half of these tests, run
// as nobody, performs.
const fileChildEnv = "WANLAB_FILES_TEST_CHILD"

type fileOp struct {
	Op     string // "symlink", "mkdir", "read"
	Path   string
	Target string `json:",omitempty"`
}

type fileOpResult struct {
	Err  string
	Data string
}

// TestFilesChildProcess is the child half: it performs each operation
// and prints one JSON result per operation.
func TestFilesChildProcess(t *testing.T) {
	if os.Getenv(fileChildEnv) == "" {
		t.Skip("helper process of the unprivileged file tests")
	}
	var ops []fileOp
	if err := json.Unmarshal([]byte(os.Getenv(fileChildEnv)), &ops); err != nil {
		fmt.Println(`{"Err":"bad operations"}`)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, op := range ops {
		var r fileOpResult
		var err error
		switch op.Op {
		case "symlink":
			err = os.Symlink(op.Target, op.Path)
		case "mkdir":
			err = os.Mkdir(op.Path, 0o777)
		case "read":
			var b []byte
			b, err = os.ReadFile(op.Path)
			r.Data = string(b)
		default:
			err = fmt.Errorf("unknown op %q", op.Op)
		}
		if err != nil {
			r.Err = err.Error()
		}
		enc.Encode(r)
	}
	os.Exit(0)
}

// asNobody runs ops as uid/gid 65534 in a copy of this test binary.
func asNobody(t *testing.T, ops ...fileOp) []fileOpResult {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("WANLAB_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal("needs root to run a child as uid 65534")
		}
		t.Skip("needs root to run a child as uid 65534")
	}
	js, _ := json.Marshal(ops)
	cmd := testenv.ChildCommand(t, nobody, nobody, nil, "^TestFilesChildProcess$", fileChildEnv+"="+string(js))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child as uid %d: %v\n%s", nobody, err, out)
	}
	var res []fileOpResult
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var r fileOpResult
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			res = append(res, r)
		}
	}
	if len(res) != len(ops) {
		t.Fatalf("child did %d of %d operations:\n%s", len(res), len(ops), out)
	}
	return res
}

// publicDir is a new directory everyone may traverse (t.TempDir's are
// 0700), removed at the end.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wanlab-files-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sharedDir is a directory anyone can write to, sticky as /tmp, and a
// root-only victim file beside it.
func sharedDir(t *testing.T) (shared, victim string) {
	t.Helper()
	base := publicDir(t)
	shared = filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(private, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	return shared, victim
}

func requireIntact(t *testing.T, victim string) {
	t.Helper()
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Fatalf("root-only %s is now %q (%v): written through a planted link", victim, b, err)
	}
}

// TestUnprivilegedLinksAtOutputsAreNotFollowed: links nobody planted at
// the --pcap, -o and --report paths root names are refused (exit 2), and
// --force replaces them with a new file: the root-only file they point at
// keeps its content. A capture is 0600: nobody cannot read its payloads.
func TestUnprivilegedLinksAtOutputsAreNotFollowed(t *testing.T) {
	shared, victim := sharedDir(t)
	names := []string{"cap.pcapng", "trace.txt", "plot.png", "report.html"}
	var ops []fileOp
	for _, n := range names {
		ops = append(ops, fileOp{Op: "symlink", Path: filepath.Join(shared, n), Target: victim})
	}
	for i, r := range asNobody(t, ops...) {
		if r.Err != "" {
			t.Fatalf("nobody planting %s: %s", names[i], r.Err)
		}
	}
	traceFile := filepath.Join(t.TempDir(), "in.trace")
	if err := os.WriteFile(traceFile, []byte("1\n2\n5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmds := map[string][]string{
		"cap.pcapng":  {"proxy", "--iface", "wanlab-no-a", "--iface", "wanlab-no-b", "--pcap", filepath.Join(shared, "cap.pcapng")},
		"trace.txt":   {"trace", "constant", "--rate", "1mbit", "--duration", "1s", "-o", filepath.Join(shared, "trace.txt")},
		"plot.png":    {"trace", "plot", "-o", filepath.Join(shared, "plot.png"), traceFile},
		"report.html": {"analyze", "--report", filepath.Join(shared, "report.html"), analyzeCapture},
	}
	for _, n := range names {
		out, err, code := runApp(context.Background(), cmds[n]...)
		if code != exitUsage || err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), n) {
			t.Errorf("%s at a planted link: exit %d, %v\n%s", n, code, err, out)
		}
		requireIntact(t, victim)
		if n == "cap.pcapng" {
			continue // --force below, with a running proxy
		}
		// --force: the link is replaced by a new file, never written
		// through.
		at := 1 // after the command's name(s): flags come before arguments
		if cmds[n][0] == "trace" {
			at = 2
		}
		forced := append(append(append([]string{}, cmds[n][:at]...), "--force"), cmds[n][at:]...)
		if _, err, code = runApp(context.Background(), forced...); code != exitOK {
			t.Errorf("%s --force: exit %d, %v", n, code, err)
		}
		requireIntact(t, victim)
		if fi, err := os.Lstat(filepath.Join(shared, n)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s after --force: %v, %v; want a regular file in place of the link", n, fi, err)
		}
	}
	// The proxy's capture, while it waits for its interfaces: a new 0600
	// file in place of the link with --force, and one nobody cannot read
	// without a link. A proxy that never started removes it.
	for _, c := range []struct {
		path  string
		force bool
	}{{filepath.Join(shared, "cap.pcapng"), true}, {filepath.Join(shared, "fresh.pcapng"), false}} {
		args := []string{"proxy", "--iface", "wanlab-no-a", "--iface", "wanlab-no-b", "--wait-ifaces", "60s", "--pcap", c.path}
		if c.force {
			args = append(args, "--force")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err, _ := runApp(ctx, args...); done <- err }()
		testenv.WaitFor(t, "the capture "+c.path, func() bool {
			fi, err := os.Lstat(c.path)
			return err == nil && fi.Mode().IsRegular()
		})
		fi, err := os.Lstat(c.path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("capture %s: %v, %v; want mode 0600", c.path, fi, err)
		}
		requireIntact(t, victim)
		if r := asNobody(t, fileOp{Op: "read", Path: c.path})[0]; r.Err == "" || !strings.Contains(r.Err, "permission denied") {
			t.Errorf("nobody read the capture %s: %q, %s", c.path, r.Data, r.Err)
		}
		cancel()
		<-done
		if _, err := os.Lstat(c.path); err == nil {
			t.Errorf("%s left by a proxy that never started", c.path)
		}
	}
}

// TestUnprivilegedDirsAtOutputsAreNotUsed: an --out or --plots directory
// nobody made in the shared directory is not written into without
// --force, and a link there is refused even with it.
func TestUnprivilegedDirsAtOutputsAreNotUsed(t *testing.T) {
	shared, victim := sharedDir(t)
	planted := filepath.Join(shared, "plots")
	link := filepath.Join(shared, "linked")
	res := asNobody(t, fileOp{Op: "mkdir", Path: planted}, fileOp{Op: "symlink", Path: link, Target: filepath.Dir(victim)})
	for _, r := range res {
		if r.Err != "" {
			t.Fatal(r.Err)
		}
	}
	out, err, code := runApp(context.Background(), "analyze", "--plots", planted, analyzeCapture)
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), planted) {
		t.Fatalf("--plots into nobody's directory: exit %d, %v\n%s", code, err, out)
	}
	if ents, _ := os.ReadDir(planted); len(ents) != 0 {
		t.Fatalf("%d files written into nobody's directory", len(ents))
	}
	_, err, code = runApp(context.Background(), "analyze", "--plots", link, "--force", analyzeCapture)
	if code == exitOK || err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("--plots at a link with --force: exit %d, %v", code, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(victim)); len(ents) != 1 {
		t.Fatalf("files written through the link: %d entries beside the victim", len(ents)-1)
	}
}

// TestUnboundedInputsStopAtTheirLimit: every file a command reads by name
// must be a regular file under its limit; /dev/zero, a FIFO (with no
// writer: opening must not block) and a too-large file end in exit 2
// naming the file and the limit, before anything much is read.
func TestUnboundedInputsStopAtTheirLimit(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is what is refused, nothing is read.
	if err := f.Truncate(300 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, file := range []string{"/dev/zero", fifo, big} {
		for _, args := range [][]string{
			{"simulate", "--spec", "@" + file},
			{"simulate", "--classes", "@" + file, "--flow", "dst=10.0.2.1,rate=1mbit"},
			{"simulate", "--spec", "delay 1ms | trace " + file},
			{"simulate", "--schedule", file},
			{"trace", "stats", file},
			{"kernel", "apply", "--iface", "wanlab-no-a", "@" + file},
		} {
			limit := "64 MiB"
			if args[0] == "trace" || (len(args) > 2 && strings.Contains(args[2], "trace ")) {
				limit = "256 MiB"
			}
			_, err, code := runApp(context.Background(), args...)
			if code != exitUsage || err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), limit) ||
				strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: exit %d, %v; want exit 2 naming %s and the %s limit", args, code, err, file, limit)
			}
		}
	}
	// A capture has no size limit (the analyzer streams it), but a FIFO
	// or a device is no capture: refused before it is opened.
	for _, file := range []string{"/dev/zero", fifo} {
		for _, args := range [][]string{{"analyze", file}, {"fit", file}, {"experiment", "--like", file}} {
			_, err, code := runApp(context.Background(), args...)
			if code != exitUsage || err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%q: exit %d, %v; want exit 2: not a regular file", args, code, err)
			}
		}
	}
}

// TestSimulateFloodStaysWithinQueueMemory: a spec that holds every packet
// ("delay 1e9s limit 4294967295") under a flood keeps no more than
// --queue-memory inside; the rest are counted as queue drops, and the
// spec is warned about.
func TestSimulateFloodStaysWithinQueueMemory(t *testing.T) {
	out, code := runWanlab(t, "simulate", "--spec", "delay 1e9s limit 4294967295", "--packets", "100000", "--pps", "1000000",
		"--queue-memory", "8mb", "--json")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var res struct {
		PacketsOut uint64   `json:"packets_out"`
		Warnings   []string `json:"warnings"`
		Drops      struct {
			Queue uint64 `json:"queue"`
		} `json:"drops"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// At least a buffer of 1500 bytes each: at most 8 MiB / 1500 held.
	if held := 100000 - res.Drops.Queue; res.Drops.Queue == 0 || held > 8<<20/1500 || res.PacketsOut != held {
		t.Fatalf("%d queue drops, %d out: want at most %d packets held", res.Drops.Queue, res.PacketsOut, 8<<20/1500)
	}
	// The budget's warning, beside the delay's (no limit holds 1e9 s).
	if len(res.Warnings) != 2 || !strings.Contains(res.Warnings[1], "--queue-memory") ||
		!strings.Contains(res.Warnings[0], "no limit holds it") {
		t.Fatalf("warnings %q: want the delay's and the budget's", res.Warnings)
	}
}
