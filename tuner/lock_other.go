//go:build !unix

package tuner

// lockBackup is a no-op where flock does not exist.
func lockBackup(string) (func(), error) { return func() {}, nil }
