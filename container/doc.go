// Package container holds wanlab's container image (Dockerfile, built
// offline by scripts/build-image.sh) and the test of a three-container
// topology in which a wanlab container is the link between a client and a
// server network, as a node of a containerlab topology would be
// (docs/topologies.md). It has no code of its own.
package container
