//go:build !(linux && cgo)

package gpu

import (
	"fmt"
	"log/slog"
)

// NVML is unavailable in this build: go-nvml needs cgo on Linux.
type NVML struct{ Backend }

// OpenNVML says why there is no real backend in this build.
func OpenNVML(*slog.Logger) (*NVML, error) {
	return nil, fmt.Errorf("%w: this berth was built without cgo on Linux, which NVML needs", ErrNoDriver)
}
