//go:build !unix

package tuner

import "errors"

// lockBackup is a no-op where flock does not exist.
func lockBackup(string) (func(), error) { return func() {}, nil }

var errLocked = errors.New("locked by another process")

func tryLockBackup(string) (func(), error) { return func() {}, nil }
