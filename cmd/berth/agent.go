package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berthsched/berth/internal/agent"
	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	var (
		cfg       agent.Config
		servers   string
		tokenFile string
		fakeGPUs  int
		fakeModel string
		fakeMIG   string
		inject    string
		cgroups   string
		logJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: report this node's GPUs and run what the control plane places here",
		Long: `The node agent heartbeats to the berth server with the node's GPUs, their
health and the allocations running, and converges to the desired state the
server answers with. Work keeps running while the server is unreachable.

On a GPU node it finds the GPUs through NVML (the NVIDIA driver). Without
one, --fake-gpus N stands in, and faults can be injected with
'berth agent inject'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(cmd, logJSON)
			if servers == "" {
				servers = os.Getenv("BERTH_ADDR")
			}
			if servers == "" {
				servers = "127.0.0.1:7070"
			}
			for _, s := range strings.Split(servers, ",") {
				if s = strings.TrimSpace(s); s != "" {
					cfg.Servers = append(cfg.Servers, s)
				}
			}
			if cfg.Token == "" && tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				cfg.Token = strings.TrimSpace(string(b))
			}
			if cfg.Token == "" {
				cfg.Token = os.Getenv("BERTH_TOKEN")
			}
			if cfg.Token == "" {
				return errors.New("--token: required: an agent token (berth token create --role agent:<node-id>), via --token, --token-file or BERTH_TOKEN")
			}
			if cfg.NodeID == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("--node-id: not given and no hostname: %w", err)
				}
				cfg.NodeID = h
			}
			switch cgroups {
			case "auto":
				cfg.Cgroups = true
			case "off":
			default:
				return fmt.Errorf("--cgroups: %q: expected auto or off", cgroups)
			}
			if inject == "" {
				inject = filepath.Join(cfg.StateDir, "inject")
			}
			b, err := openBackend(fakeGPUs, fakeModel, fakeMIG, cfg.NodeID, inject, log)
			if err != nil {
				return err
			}
			cfg.Backend, cfg.Logger = b, log
			a, err := agent.New(cfg)
			if err != nil {
				b.Close()
				return err
			}
			defer a.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if fakeGPUs > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "inject faults with: berth agent inject --file %s --gpu 0 --xid 48\n", inject)
			}
			return a.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&servers, "server", "", "berth server address, or several separated by commas (default $BERTH_ADDR, else 127.0.0.1:7070)")
	f.StringVar(&cfg.Token, "token", "", "agent token, role agent:<node-id> (default $BERTH_TOKEN)")
	f.StringVar(&tokenFile, "token-file", "", "read the token from this file")
	f.StringVar(&cfg.NodeID, "node-id", "", "this node's id (default the hostname)")
	f.StringVar(&cfg.Pod, "pod", "default", "the pod (leaf switch) this node hangs off")
	f.StringVar(&cfg.Pool, "pool", "", "node pool, when the fleet has several")
	f.StringVar(&cfg.Model, "model", "", "GPU model to report (default: what NVML says, shortened, e.g. H100)")
	f.StringVar(&cfg.StateDir, "state-dir", "/var/lib/berth-agent", "directory kept across restarts: boot epoch, allocation logs")
	f.DurationVar(&cfg.Interval, "heartbeat-interval", 5*time.Second, "time between heartbeats until the server names its own")
	f.Int64Var(&cfg.CPUMilli, "cpu-milli", 0, "CPU to report, in millicores (default: the host's)")
	f.Int64Var(&cfg.MemoryMiB, "memory-mib", 0, "memory to report, in MiB (default: the host's)")
	f.Int64Var(&cfg.LogMaxBytes, "log-max-bytes", 64<<20, "cap on each allocation's stdout and stderr log (one rotated file is kept)")
	f.DurationVar(&cfg.LogRetention, "log-retention", 72*time.Hour, "how long a finished allocation's directory and logs are kept after the server released it")
	f.DurationVar(&cfg.OrphanGrace, "orphan-grace", 30*time.Second, "SIGTERM-to-SIGKILL time for work the server no longer lists")
	f.StringVar(&cgroups, "cgroups", "auto", "per-allocation cgroup v2 cpu/memory limits: auto (where delegated) or off")
	f.StringVar(&cfg.CgroupRoot, "cgroup-root", "", "delegated cgroup v2 directory (default: the agent's own cgroup)")
	f.StringVar(&cfg.Container.Podman, "podman", "podman", "podman binary that runs workloads naming an image")
	f.StringVar(&cfg.Container.Runtime, "container-runtime", "", "OCI runtime podman runs containers with, a full path such as /usr/sbin/runc (default: podman's)")
	f.StringVar(&cfg.Container.Pull, "image-pull", "missing", "image pull policy: missing, always or never")
	f.StringVar(&cfg.Container.AuthFile, "registry-authfile", "", "registry credentials for pulls (podman's --authfile); jobs never carry credentials")
	f.StringArrayVar(&cfg.Container.Args, "container-arg", nil, "an option for every podman run, e.g. --container-arg=--ulimit=nofile=20000:20000 (repeatable)")
	f.StringSliceVar(&cfg.Container.CDIDirs, "cdi-dir", []string{"/etc/cdi", "/var/run/cdi"}, "directories searched for CDI specs of the node's GPUs")
	f.IntVar(&fakeGPUs, "fake-gpus", 0, "no GPUs here: pretend to have this many (for dev, demos and tests)")
	f.StringVar(&fakeModel, "fake-model", "H100", "model the fake GPUs report")
	f.StringVar(&fakeMIG, "fake-mig", "", "partition fake GPUs into MIG instances: GPU=SLICES,... per GPU, e.g. 0=3,2,1,1;1=7")
	f.StringVar(&inject, "fake-inject", "", "file the fake backend takes injected faults from (default <state-dir>/inject)")
	f.BoolVar(&logJSON, "log-json", false, "log JSON lines instead of text")
	// A reboot, as the agent sees it, without rebooting: for the fault
	// tests, never for a real node.
	f.StringVar(&cfg.BootID, "boot-id", "", "stand-in for the kernel's boot id (tests only)")
	_ = f.MarkHidden("boot-id")
	cmd.AddCommand(newInjectCmd(), newGPUsCmd())
	return cmd
}

// openBackend picks NVML, or the fake when asked; without either it
// refuses, saying which to do.
func openBackend(fakeGPUs int, fakeModel, fakeMIG, node, inject string, log *slog.Logger) (gpu.Backend, error) {
	if fakeGPUs > 0 {
		mig, err := gpu.ParseMIGLayout(fakeMIG)
		if err != nil {
			return nil, err
		}
		return gpu.NewFake(gpu.FakeConfig{GPUs: fakeGPUs, Model: fakeModel, UUIDPrefix: node + "-", InjectFile: inject, MIG: mig, Logger: log})
	}
	if fakeMIG != "" {
		return nil, errors.New("--fake-mig: only with --fake-gpus; real GPUs are partitioned with nvidia-smi mig")
	}
	if fakeGPUs < 0 {
		return nil, fmt.Errorf("--fake-gpus: %d: expected a positive count", fakeGPUs)
	}
	b, err := gpu.OpenNVML(log)
	if errors.Is(err, gpu.ErrNoDriver) {
		return nil, fmt.Errorf("%v\n  on a GPU node: install the NVIDIA driver so libnvidia-ml.so.1 loads\n  without GPUs: pass --fake-gpus N (and --fake-model) to run a fake node", err)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func newInjectCmd() *cobra.Command {
	var (
		file     string
		stateDir string
		in       gpu.Injection
	)
	cmd := &cobra.Command{
		Use:   "inject",
		Short: "Inject a GPU fault into a fake-GPU agent (XID, ECC, lost GPU, NVML failing)",
		Example: `  berth agent inject --state-dir /tmp/n1 --gpu 3 --xid 48   # GPU 3 is quarantined
  berth agent inject --state-dir /tmp/n1 --xid 79            # fell off the bus: the node
  berth agent inject --state-dir /tmp/n1 --gpu 2 --xid 13    # the job's own error
  berth agent inject --state-dir /tmp/n1 --kind nvml         # NVML fails
  berth agent inject --state-dir /tmp/n1 --kind nvml --clear`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				if stateDir == "" {
					return errors.New("--file or --state-dir: required: where the fake agent takes injections from")
				}
				file = filepath.Join(stateDir, "inject")
			}
			if err := gpu.Inject(file, in); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "injected into %s; the agent reports it in its next heartbeat\n", file)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "the agent's inject file")
	f.StringVar(&stateDir, "state-dir", "", "the agent's state dir (the file is <state-dir>/inject)")
	f.IntVar(&in.GPU, "gpu", 0, "GPU index")
	f.IntVar(&in.XID, "xid", 0, "XID number")
	f.StringVar(&in.Kind, "kind", "", "xid (default with --xid), ecc, lost or nvml")
	f.StringVar(&in.Message, "message", "", "text to report with it")
	f.BoolVar(&in.Clear, "clear", false, "with --kind nvml: NVML recovers")
	return cmd
}
