package nsrun

// EnsureShared is ensureShared for the external tests.
var EnsureShared = ensureShared
