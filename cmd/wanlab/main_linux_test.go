package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMainExitStatus runs wanlab's main in a child process (TestMain's
// mainArgsEnv): the process's own exit status, standard output and
// standard error, as a shell script sees them.
func TestMainExitStatus(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args         []string
		code         int
		stdout, errs string // what each must start with; "" for empty
	}{
		{[]string{"analyze", analyzeCapture, "--jsn"}, exitUsage, "", "wanlab: analyze: unknown flag --jsn\nusage: wanlab analyze "},
		{[]string{"analyze", analyzeCapture, "--help"}, exitOK, "NAME:\n   wanlab analyze - ", ""},
		{[]string{"analyze", analyzeCapture, "--json"}, exitOK, "{", ""},
		{[]string{"nosuch"}, exitUsage, "", "wanlab: unknown command \"nosuch\"\nusage: "},
	} {
		args, _ := json.Marshal(c.args)
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(args))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		ok := func(got, want string) bool {
			if want == "" {
				return got == ""
			}
			return strings.HasPrefix(got, want)
		}
		if code != c.code || !ok(stdout.String(), c.stdout) || !ok(stderr.String(), c.errs) {
			t.Errorf("wanlab %q: exit %d, want %d\nstdout %.300q\nstderr %.300q", c.args, code, c.code, stdout.String(), stderr.String())
		}
	}
}
