// Package e2e holds the tuner's end-to-end tests: real downloads through
// the lab (client, router running the userspace proxy, server) compared
// with what the tuner predicts. It has no code of its own; keeping the
// tests here keeps the tuner's unit tests free of the lab and analyzer.
package e2e
