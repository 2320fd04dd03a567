//go:build tools

// Package node pins the container runtime of the local stack's real node: containerd 2 (the
// kubelet 1.36 needs a CRI of containerd 2), its runc shim and ctr, which loads the images built
// here into the node.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
