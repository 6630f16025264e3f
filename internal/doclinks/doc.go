// Package doclinks holds the test that keeps the repository's Markdown
// links valid: every relative link names a file that exists and, with a
// #fragment, a heading of that file. It has no code of its own.
package doclinks
