package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// guestModules are loaded at boot, with their dependencies from
// modules.dep: the NIC and control port drivers, and the qdiscs, filters
// and actions wanlab's kernel path builds.
var guestModules = []string{
	"virtio_pci", "virtio_net", "virtio_console", "tun", "ifb", "act_mirred", "cls_u32",
	"sch_netem", "sch_tbf", "sch_htb", "sch_ingress", "sch_prio", "sch_sfq", "sch_fq", "sch_codel",
	"sch_pie", "sch_red",
}

// Host files the initramfs is built from, and the Debian package of each.
var hostTools = []struct{ path, pkg string }{
	{"/bin/busybox", "busybox-static"},
	{"/usr/sbin/tc", "iproute2"},
	{"/usr/sbin/ip", "iproute2"},
}

// Prepare makes cacheDir hold the newest linux-image-6.1.0-*-cloud-amd64
// that apt knows, unpacked (fetched with apt-get download unless that
// release is cached already), and an initramfs built from this host's
// busybox-static and iproute2. It is idempotent: with the kernel cached it
// only rebuilds the initramfs, which takes about a second. Progress goes to
// log.
func Prepare(ctx context.Context, cacheDir string, log io.Writer) (*Prepared, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	for _, t := range hostTools {
		if _, err := os.Stat(t.path); err != nil {
			return nil, fmt.Errorf("vm prepare: %s missing: install Debian's %s", t.path, t.pkg)
		}
	}
	if interp, _ := elfInterp("/bin/busybox"); interp != "" {
		return nil, fmt.Errorf("vm prepare: /bin/busybox is dynamically linked: install Debian's busybox-static")
	}
	if err := os.MkdirAll(filepath.Join(cacheDir, "kernel"), 0o755); err != nil {
		return nil, fmt.Errorf("vm prepare: %w", err)
	}
	pkg, err := newestKernelPackage(ctx)
	cached := cachedReleases(cacheDir)
	if err != nil {
		if len(cached) == 0 {
			return nil, fmt.Errorf("vm prepare: %w", err)
		}
		fmt.Fprintf(log, "vm prepare: %v; using the cached kernel\n", err)
		pkg = "linux-image-" + cached[len(cached)-1]
	}
	release := strings.TrimPrefix(pkg, "linux-image-")
	kdir := filepath.Join(cacheDir, "kernel", release)
	if _, err := os.Stat(filepath.Join(kdir, "version")); err != nil {
		fmt.Fprintf(log, "vm prepare: fetching %s\n", pkg)
		if err := fetchKernel(ctx, cacheDir, pkg, kdir); err != nil {
			return nil, fmt.Errorf("vm prepare: %w", err)
		}
	} else {
		fmt.Fprintf(log, "vm prepare: %s cached in %s\n", pkg, kdir)
	}
	version, err := os.ReadFile(filepath.Join(kdir, "version"))
	if err != nil {
		return nil, fmt.Errorf("vm prepare: %w", err)
	}
	for _, old := range cachedReleases(cacheDir) {
		if old != release {
			os.RemoveAll(filepath.Join(cacheDir, "kernel", old))
			os.Remove(filepath.Join(cacheDir, "initramfs-"+old+".cpio.gz"))
		}
	}
	p := &Prepared{
		Package: pkg, Version: strings.TrimSpace(string(version)), Release: release,
		Kernel:    filepath.Join(kdir, "boot", "vmlinuz-"+release),
		Initramfs: filepath.Join(cacheDir, "initramfs-"+release+".cpio.gz"),
		Created:   time.Now().UTC(),
	}
	if p.Modules, err = buildInitramfs(kdir, release, p.Initramfs); err != nil {
		return nil, fmt.Errorf("vm prepare: initramfs: %w", err)
	}
	b, _ := json.MarshalIndent(p, "", "  ")
	if err := writeAtomic(filepath.Join(cacheDir, "prepared.json"), append(b, '\n')); err != nil {
		return nil, fmt.Errorf("vm prepare: %w", err)
	}
	fmt.Fprintf(log, "vm prepare: kernel %s (%s), initramfs %s\n", release, p.Version, p.Initramfs)
	return p, nil
}

var kernelPackageRE = regexp.MustCompile(KernelPackagePattern)

// newestKernelPackage asks apt-cache for the kernel packages it lists and
// returns the one with the highest ABI number.
func newestKernelPackage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "search", "--names-only", KernelPackagePattern).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache search: %w", err)
	}
	return newestIn(string(out))
}

// newestIn picks, from apt-cache search output ("NAME - DESCRIPTION" per
// line), the kernel package with the highest ABI number (numerically:
// -10- is newer than -9-).
func newestIn(out string) (string, error) {
	best, bestN := "", -1
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(line, " ")
		if !kernelPackageRE.MatchString(name) {
			continue
		}
		abi := strings.TrimSuffix(strings.TrimPrefix(name, "linux-image-6.1.0-"), "-cloud-amd64")
		if n, err := strconv.Atoi(abi); err == nil && n > bestN {
			best, bestN = name, n
		}
	}
	if best == "" {
		return "", errors.New("apt-cache lists no linux-image-6.1.0-*-cloud-amd64 (run apt-get update)")
	}
	return best, nil
}

// cachedReleases lists the unpacked kernels, oldest ABI first.
func cachedReleases(cacheDir string) []string {
	ents, _ := os.ReadDir(filepath.Join(cacheDir, "kernel"))
	var out []string
	for _, e := range ents {
		if e.IsDir() && kernelPackageRE.MatchString("linux-image-"+e.Name()) {
			if _, err := os.Stat(filepath.Join(cacheDir, "kernel", e.Name(), "version")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return abiOf(out[i]) < abiOf(out[j]) })
	return out
}

func abiOf(release string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(release, "6.1.0-"), "-cloud-amd64"))
	return n
}

// fetchKernel downloads pkg with apt-get download and unpacks its boot/
// and lib/modules/ into kdir; "version" is written last, as the mark of a
// complete unpack.
func fetchKernel(ctx context.Context, cacheDir, pkg, kdir string) error {
	dl, err := os.MkdirTemp(cacheDir, "download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dl)
	// apt drops privileges to _apt for downloads into a directory _apt can
	// write; a private temporary directory makes it warn and fetch as root.
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", pkg)
	cmd.Dir = dl
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %w: %s", pkg, err, lastLine(out))
	}
	debs, _ := filepath.Glob(filepath.Join(dl, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s: %d .deb files", pkg, len(debs))
	}
	version, err := exec.CommandContext(ctx, "dpkg-deb", "-f", debs[0], "Version").Output()
	if err != nil {
		return fmt.Errorf("dpkg-deb -f %s: %w", debs[0], err)
	}
	x := filepath.Join(dl, "x")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %w: %s", debs[0], err, lastLine(out))
	}
	os.RemoveAll(kdir)
	if err := os.MkdirAll(filepath.Join(kdir, "lib"), 0o755); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(x, "boot"), filepath.Join(kdir, "boot")); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(x, "lib", "modules"), filepath.Join(kdir, "lib", "modules")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(kdir, "version"), version, 0o644)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// elfInterp returns an ELF file's program interpreter ("" for a static
// executable).
func elfInterp(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return "", err
			}
			return strings.TrimRight(string(b), "\x00"), nil
		}
	}
	return "", nil
}

// libDirs are searched for shared libraries as ld.so's default path does on
// Debian amd64.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// sharedLibs returns the interpreter and every shared library the ELF files
// need, transitively, as paths on this host.
func sharedLibs(files ...string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var visit func(file string) error
	visit = func(file string) error {
		f, err := elf.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		if interp, err := elfInterp(file); err == nil && interp != "" && !seen[interp] {
			seen[interp] = true
			out = append(out, interp)
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, lib := range libs {
			found := ""
			for _, d := range libDirs {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s: not found in %s", file, lib, strings.Join(libDirs, ", "))
			}
			if seen[found] {
				continue
			}
			seen[found] = true
			out = append(out, found)
			if err := visit(found); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range files {
		if err := visit(f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// libPath is where the initramfs holds the host library l: the loader at
// its own path, every other library in the one directory ld.so searches.
func libPath(l string) string {
	if strings.HasPrefix(l, "/lib64/") {
		return strings.TrimPrefix(l, "/")
	}
	return "lib/x86_64-linux-gnu/" + path.Base(l)
}

// moduleOrder returns the module files (relative to the modules dir) to
// insmod for want, dependencies first. The package ships no modules.dep
// (depmod makes it on install), so dependencies are read from each
// module's .modinfo section ("depends=a,b"), as depmod does; modules built
// into the kernel (modules.builtin) are left out.
func moduleOrder(modDir string, want []string) ([]string, error) {
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	isBuiltin := map[string]bool{}
	for _, l := range strings.Fields(string(builtin)) {
		isBuiltin[modName(l)] = true
	}
	file := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(modDir, p)
			file[modName(p)] = rel
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []string
	done := map[string]bool{}
	var load func(m string, chain []string) error
	load = func(m string, chain []string) error {
		if done[m] || isBuiltin[m] {
			return nil
		}
		f, ok := file[m]
		if !ok {
			return fmt.Errorf("module %s (for %s): not in %s", m, strings.Join(chain, " <- "), modDir)
		}
		done[m] = true
		deps, err := moduleDepends(filepath.Join(modDir, f))
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := load(d, append(chain, m)); err != nil {
				return err
			}
		}
		out = append(out, f)
		return nil
	}
	for _, m := range want {
		if err := load(m, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// moduleDepends reads "depends=" from a module's .modinfo section.
func moduleDepends(ko string) ([]string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", ko)
	}
	b, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: .modinfo: %w", ko, err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, modName(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// modName turns "kernel/net/sched/sch_netem.ko" into "sch_netem".
func modName(p string) string {
	return strings.ReplaceAll(strings.TrimSuffix(path.Base(p), ".ko"), "-", "_")
}

// initScript is the guest's /init: mount the pseudo file systems, load the
// modules, then hand over to the agent (or power off at once for the
// accelerator probe).
const initScript = `#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
grep -q wanlab.probe /proc/cmdline && poweroff -f
while read -r m; do insmod "$m" || echo "init: insmod $m failed"; done < /etc/wanlab/modules
exec /bin/wanlab vm agent
echo "init: /bin/wanlab did not start"
poweroff -f
`

// buildInitramfs writes the base initramfs (everything but the wanlab
// binary, which Boot appends) and returns the modules it loads.
func buildInitramfs(kdir, release, out string) ([]string, error) {
	modDir := filepath.Join(kdir, "lib", "modules", release)
	mods, err := moduleOrder(modDir, guestModules)
	if err != nil {
		return nil, err
	}
	libs, err := sharedLibs("/usr/sbin/tc", "/usr/sbin/ip")
	if err != nil {
		return nil, err
	}
	applets, err := exec.Command("/bin/busybox", "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	a := &archive{c: cpioWriter{w: zw}, dirs: map[string]bool{"": true, ".": true}}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "etc/wanlab", "bin", "sbin", "usr/bin", "usr/sbin"} {
		a.mkdirAll(d)
	}
	a.symlink("var/run", "../run")
	a.copyFile("/bin/busybox", "bin/busybox", 0o755)
	for _, ap := range strings.Fields(string(applets)) {
		// iproute2's ip and tc stand in for busybox's, which cannot add
		// qdiscs; the rest are busybox's.
		if b := path.Base(ap); b == "ip" || b == "tc" || b == "busybox" {
			continue
		}
		a.symlink(ap, "/bin/busybox")
	}
	a.copyFile("/usr/sbin/tc", "usr/sbin/tc", 0o755)
	a.copyFile("/usr/sbin/ip", "usr/sbin/ip", 0o755)
	for _, l := range libs {
		a.copyFile(l, libPath(l), 0o755)
	}
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc"} {
		dists, _ := filepath.Glob(filepath.Join(d, "*.dist"))
		for _, f := range dists {
			a.copyFile(f, strings.TrimPrefix(f, "/"), 0o644)
		}
	}
	var list strings.Builder
	for _, m := range mods {
		dst := "lib/modules/" + release + "/" + m
		a.copyFile(filepath.Join(modDir, m), dst, 0o644)
		list.WriteString("/" + dst + "\n")
	}
	a.copyFile(filepath.Join(modDir, "modules.builtin"), "lib/modules/"+release+"/modules.builtin", 0o644)
	a.file("etc/wanlab/modules", 0o644, []byte(list.String()))
	a.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.file("init", 0o755, []byte(initScript))
	if a.err != nil {
		return nil, a.err
	}
	if err := a.c.close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := writeAtomic(out, buf.Bytes()); err != nil {
		return nil, err
	}
	names := make([]string, len(mods))
	for i, m := range mods {
		names[i] = modName(m)
	}
	return names, nil
}

// archive adds files to a cpio stream, creating parent directories once.
type archive struct {
	c    cpioWriter
	dirs map[string]bool
	err  error
}

func (a *archive) mkdirAll(d string) {
	if a.dirs[d] {
		return
	}
	a.mkdirAll(path.Dir(strings.TrimSuffix(d, "/")))
	if d == "." {
		return
	}
	a.dirs[d] = true
	a.c.dir(d)
}

func (a *archive) file(name string, perm os.FileMode, data []byte) {
	a.mkdirAll(path.Dir(name))
	a.c.file(name, perm, data)
}

func (a *archive) symlink(name, target string) {
	name = strings.TrimPrefix(name, "/")
	a.mkdirAll(path.Dir(name))
	a.c.symlink(name, target)
}

// copyFile adds the host file src (symlinks followed) as dst.
func (a *archive) copyFile(src, dst string, perm os.FileMode) {
	if a.err != nil {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		a.err = err
		return
	}
	a.file(dst, perm, b)
}

// enginePackages are the Debian packages each engine runs on, by the
// command or file that shows one installed.
var enginePackages = map[Engine][]struct{ path, pkg string }{
	EngineKVM: {{"/usr/bin/" + qemuBinary, "qemu-system-x86"}, {"/bin/busybox", "busybox-static"}, {"/usr/sbin/tc", "iproute2"}},
	EngineTCG: {{"/usr/bin/" + qemuBinary, "qemu-system-x86"}, {"/bin/busybox", "busybox-static"}, {"/usr/sbin/tc", "iproute2"}},
	EngineUML: {{umlBinary, "user-mode-linux"}, {"/usr/sbin/tc", "iproute2"}},
}

// InstallEngine installs with apt-get what the engine needs and is
// missing (for EngineAuto, what any of them needs: auto may fall back to
// each). A /bin/busybox that is not static counts as missing.
func InstallEngine(ctx context.Context, e Engine, log io.Writer) error {
	engines := []Engine{e}
	if e == EngineAuto {
		engines = []Engine{EngineKVM, EngineUML}
	}
	seen := map[string]bool{}
	var missing []string
	for _, e := range engines {
		for _, p := range enginePackages[e] {
			_, err := os.Stat(p.path)
			if p.pkg == "busybox-static" && err == nil {
				if interp, _ := elfInterp(p.path); interp != "" {
					err = errors.New("dynamic")
				}
			}
			if err != nil && !seen[p.pkg] {
				seen[p.pkg] = true
				missing = append(missing, p.pkg)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fmt.Fprintf(log, "vm prepare: installing %s\n", strings.Join(missing, " "))
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, missing...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install %s: %w: %s", strings.Join(missing, " "), err, lastLine(out))
		}
		return nil
	}
	if install() == nil {
		return nil
	}
	// A stale package list is the usual cause: update once and retry.
	if out, err := exec.CommandContext(ctx, "apt-get", "update", "-q").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %w: %s", err, lastLine(out))
	}
	return install()
}
