package agent

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// BenchmarkCooperativeStop: start a process, SIGTERM it, see its group
// gone and the exit recorded. The time a preempted allocation's GPUs take
// to come free when the job cooperates at once.
func BenchmarkCooperativeStop(b *testing.B) {
	a := bareAgent(b)
	for i := 0; b.Loop(); i++ {
		id := "p" + strconv.Itoa(i)
		b.StopTimer()
		p := a.launch(helperAlloc(id, "polite", "-marker", filepath.Join(b.TempDir(), "m")))
		waitReady(b, a, id)
		b.StartTimer()
		p.stop(time.Now().Add(10*time.Second), "bench")
		<-p.done
	}
}

// BenchmarkKillAtDeadline measures how late after its deadline a process
// that ignores SIGTERM is confirmed gone (SIGKILL, reaping, the group
// check): "late-ms" is the mean.
func BenchmarkKillAtDeadline(b *testing.B) {
	a := bareAgent(b)
	var late time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		id := "k" + strconv.Itoa(i)
		p := a.launch(helperAlloc(id, "stubborn", "-marker", filepath.Join(b.TempDir(), "m")))
		waitReady(b, a, id)
		deadline := time.Now().Add(50 * time.Millisecond)
		p.stop(deadline, "bench")
		<-p.done
		late += time.Since(deadline)
		n++
	}
	b.ReportMetric(float64(late.Microseconds())/float64(n)/1000, "late-ms")
}

// BenchmarkRunToExit is a workload that exits at once, from launch to
// its exit recorded: what a driver adds to every start. For a container,
// the pull check, podman run, the OOM check and the removal.
func BenchmarkRunToExit(b *testing.B) {
	b.Run("exec", func(b *testing.B) {
		a := bareAgent(b)
		for i := 0; b.Loop(); i++ {
			p := a.launch(model.DesiredAlloc{ID: "x" + strconv.Itoa(i), OwnerKind: model.OwnerTraining, OwnerID: "j", GPUs: 1,
				Workload: &model.Workload{Command: []string{"/bin/true"}}})
			<-p.done
		}
	})
	b.Run("container", func(b *testing.B) {
		a := containerAgent(b, podmanConfig(b), b.TempDir(), "")
		defer a.Close()
		for i := 0; b.Loop(); i++ {
			p := a.launch(imageAlloc("c"+strconv.Itoa(i), "true"))
			<-p.done
		}
	})
}
