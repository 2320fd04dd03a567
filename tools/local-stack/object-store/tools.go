//go:build tools

// Package objectstore pins the local stack's object store: SeaweedFS, whose one binary serves the
// S3 API the MachineModels' storageUri names (s3://), built from its Go module.
package objectstore

import (
	_ "github.com/seaweedfs/seaweedfs/weed"
)
