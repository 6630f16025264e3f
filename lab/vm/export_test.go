package vm

// CleanupIn is Cleanup over another state directory, for tests whose
// VMs must not be found by a Cleanup that another test runs meanwhile.
var CleanupIn = cleanupIn
