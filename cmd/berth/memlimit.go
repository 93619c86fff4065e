package main

import (
	"log/slog"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitRatio is the share of a container's memory limit the
// server's Go heap may use before the collector works harder: the rest
// is for what the runtime does not count (the embedded etcd's mapped
// database, the kernel's page cache of its log) and for headroom.
// automemlimit's default, and what Prometheus uses.
const memoryLimitRatio = 0.9

// setMemoryLimit gives the Go runtime its soft memory limit (GOMEMLIMIT)
// and returns it, math.MaxInt64 for none. With --memory-limit given, that
// (0: none). Otherwise GOMEMLIMIT from the environment, if set; otherwise
// 90% of the memory limit of the cgroup the server runs in (a container's
// or a systemd unit's; AUTOMEMLIMIT=off or a ratio overrides it), found
// by automemlimit, which reads cgroup v1 and v2 as the kernel mounts them.
// Without a limit Go lets the heap grow to twice what is live between
// collections: a server holding a million jobs (1.4 GB live) peaks just
// under 4 GiB, and one whose jobs carry more (workloads, histories) or
// whose table is larger goes past what its container gives it and is
// killed. With a limit it collects more often as the heap nears it.
func setMemoryLimit(given bool, limit int64, container memlimit.Provider, log *slog.Logger) int64 {
	if given {
		if limit <= 0 {
			limit = math.MaxInt64
		}
		debug.SetMemoryLimit(limit)
		return limit
	}
	set, err := memlimit.Set(memlimit.WithProvider(container), memlimit.WithRatio(memoryLimitRatio))
	if err != nil {
		// No cgroup file readable (not Linux, an unusual mount): the
		// runtime's default stands, and the operator can still pass one.
		log.Warn("reading the container's memory limit; set --memory-limit to bound the server's memory", "err", err)
		return debug.SetMemoryLimit(-1)
	}
	if set < math.MaxInt64 {
		log.Info("memory limit", "bytes", set, "from", "the container's limit or GOMEMLIMIT")
	}
	return set
}
