package peer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/berthsched/berth/internal/model"
)

// slurmFiles writes what a one-host Slurm of the fleet needs under dir:
// slurm.conf (one NodeName per node, each slurmd on its own port),
// gres.conf (eight fake GPU device files per node: with Count= and no
// File= a node registers no GPUs and goes INVAL), topology.conf (one
// leaf switch per pod under one top switch), and the device files.
//
// The scheduler settings are a site's ordinary GPU setup, chosen to give
// Slurm its best showing here: cons_tres with backfill every second,
// topology/tree so --switches can keep a pod gang under one leaf switch,
// and partition-priority preemption that requeues training for the
// infer partition (PreemptMode=REQUEUE), never an inference job.
func slurmFiles(dir string, nodes []model.Node, ctldPort, dbdPort int, nodePorts []int, socket, dbSocket string) error {
	for _, d := range []string{"state", "spool", "log", "out", "dev"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	var conf, gres strings.Builder
	fmt.Fprintf(&conf, `# Written by berth bench slurm for a one-host Slurm of %d nodes.
ClusterName=berthpeer
SlurmctldHost=localhost
SlurmctldPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire is also how long a requeued job waits before it may start
# again (120 s by default: two simulated hours at 60x); 5 s is the least.
AuthInfo=socket=%s,cred_expire=5
CredType=cred/munge
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool/%%n
SlurmctldPidFile=%s/log/slurmctld.pid
SlurmdPidFile=%s/log/slurmd-%%n.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd-%%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
# slurmdbd on MariaDB: sacct, and GPUs in the history (gres/gpu as a
# TRES needs the database).
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=%d
AccountingStorageTRES=gres/gpu
# With munge, the "password" is the munge socket to sign with.
AccountingStoragePass=%s
JobCompType=jobcomp/filetxt
JobCompLoc=%s/jobcomp.log
SchedulerType=sched/backfill
# Backfill and the main scheduler every second; a pod gang may wait for
# one leaf switch as long as it takes (--switches=1 is a constraint).
SchedulerParameters=bf_interval=1,sched_interval=1,max_switch_wait=31536000,bf_continue
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
TopologyPlugin=topology/tree
GresTypes=gpu
SlurmdParameters=config_overrides
PriorityType=priority/basic
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
ReturnToService=2
KillWait=5
MinJobAge=600
InactiveLimit=0
`, len(nodes), ctldPort, socket, dir, dir, dir, dir, dir, dir, dbdPort, socket, dir)
	pods := map[string][]string{}
	var names []string
	for i, n := range nodes {
		fmt.Fprintf(&conf, "NodeName=%s NodeHostname=localhost Port=%d CPUs=%d RealMemory=64000 Gres=gpu:%d State=UNKNOWN\n", n.ID, nodePorts[i], max(16, 2*n.GPUs), n.GPUs)
		devs := filepath.Join(dir, "dev", n.ID)
		if err := os.MkdirAll(devs, 0o755); err != nil {
			return err
		}
		for g := range n.GPUs {
			p := filepath.Join(devs, fmt.Sprintf("gpu%d", g))
			if _, err := os.Stat(p); err == nil {
				continue
			}
			// A character device (1,3 is /dev/null's): Slurm's gres/gpu
			// only counts devices it can stat as such.
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				return fmt.Errorf("fake GPU device %s: %w (the harness runs as root)", p, err)
			}
		}
		fmt.Fprintf(&gres, "NodeName=%s Name=gpu File=%s/gpu[0-%d]\n", n.ID, devs, n.GPUs-1)
		pods[n.Pod] = append(pods[n.Pod], n.ID)
		names = append(names, n.ID)
	}
	all := strings.Join(names, ",")
	// train: preemptible training; train-np: training that asked not to
	// be preempted (PreemptMode=OFF); infer: replicas, whose higher tier
	// preempts train's jobs and nobody preempts.
	fmt.Fprintf(&conf, "PartitionName=train Nodes=%s Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE\n", all)
	fmt.Fprintf(&conf, "PartitionName=train-np Nodes=%s MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF\n", all)
	fmt.Fprintf(&conf, "PartitionName=infer Nodes=%s MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF\n", all)
	var topo strings.Builder
	var podNames []string
	for p := range pods {
		podNames = append(podNames, p)
	}
	sort.Strings(podNames)
	for _, p := range podNames {
		fmt.Fprintf(&topo, "SwitchName=%s Nodes=%s\n", p, strings.Join(pods[p], ","))
	}
	// A range like pod-[a-b] is fatal to topology/tree: list them.
	fmt.Fprintf(&topo, "SwitchName=top Switches=%s\n", strings.Join(podNames, ","))
	dbd := fmt.Sprintf(`# Written by berth bench slurm.
AuthType=auth/munge
AuthInfo=socket=%s
DbdHost=localhost
DbdPort=%d
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
LogFile=%s/log/slurmdbd.log
PidFile=%s/log/slurmdbd.pid
`, socket, dbdPort, dir, dir)
	_ = dbSocket // reached through MYSQL_UNIX_PORT: slurmdbd.conf has no socket setting
	for name, body := range map[string]string{"slurm.conf": conf.String(), "gres.conf": gres.String(), "topology.conf": topo.String(), "slurmdbd.conf": dbd} {
		// slurmdbd refuses a config others can read (it may hold a password).
		mode := os.FileMode(0o644)
		if name == "slurmdbd.conf" {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			return err
		}
	}
	return nil
}
