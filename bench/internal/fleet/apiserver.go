package fleet

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// controlPlaneProcs are the API server's and etcd's processes before the restart.
type controlPlaneProcs struct {
	pidFile    string // the API server's, across the restart
	oldPID     int    // the API server's before it
	etcdPID    int
	etcdBefore float64 // etcd's CPU seconds before it
}

// readControlPlane reads the API server's and etcd's processes, and the API server's RSS into st.
func readControlPlane(cp *measure.ControlPlane, st *fleetStorm) (controlPlaneProcs, error) {
	c := controlPlaneProcs{pidFile: filepath.Join(cp.Dir, "kube-apiserver.pid")}
	var err error
	if c.oldPID, err = measure.ReadPID(c.pidFile); err != nil {
		return c, err
	}
	st.apiSteadyRSS, _ = measure.ProcStatusBytes(c.oldPID, "VmRSS")
	if c.etcdPID, err = measure.ReadPID(filepath.Join(cp.Dir, "etcd.pid")); err != nil {
		return c, err
	}
	c.etcdBefore, _ = measure.ProcCPU(c.etcdPID)
	return c, nil
}

// samplers sample every replica's RssAnon every 20 ms, and the API server's RSS and CPU every
// 100 ms, through the restart.
type samplers struct {
	anon []*measure.SampledPeak
	stop chan struct{}
	wg   sync.WaitGroup
}

// startSamplers starts the samplers of the replicas of servers and of the API server, from start.
func startSamplers(st *fleetStorm, servers []*measure.Server, cps controlPlaneProcs, start time.Time) *samplers {
	smp := &samplers{anon: make([]*measure.SampledPeak, len(servers)), stop: make(chan struct{})}
	for i, s := range servers {
		smp.anon[i] = &measure.SampledPeak{}
		smp.wg.Go(func() { smp.anon[i].Sample(s.PID(), "RssAnon", smp.stop) })
	}
	smp.wg.Go(func() { st.sampleAPIServer(cps.pidFile, cps.oldPID, start, smp.stop) })
	return smp
}

// end stops the samplers and waits for them.
func (smp *samplers) end() {
	close(smp.stop)
	smp.wg.Wait()
}

// sampleAPIServer records the API server's RSS and CPU every 100 ms until stop, following its
// pid file across the restart.
func (st *fleetStorm) sampleAPIServer(pidFile string, oldPID int, start time.Time, stop chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if pid, err := measure.ReadPID(pidFile); err == nil {
			rss, err1 := measure.ProcStatusBytes(pid, "VmRSS")
			cpu, err2 := measure.ProcCPU(pid)
			if err1 == nil && err2 == nil {
				st.apiT = append(st.apiT, time.Since(start).Seconds())
				st.apiRSS, st.apiCPU, st.apiPID = append(st.apiRSS, rss), append(st.apiCPU, cpu), append(st.apiPID, pid)
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// cpuOfNewProcess is the CPU the API server that came back used until its last sample, and its
// highest average over a second.
func (st *fleetStorm) cpuOfNewProcess(oldPID int) (total, peak float64) {
	first := -1
	for i, pid := range st.apiPID {
		if pid != oldPID {
			if first < 0 {
				first = i
			}
			total = st.apiCPU[i]
			j := i
			for j > first && st.apiT[i]-st.apiT[j] < 1 {
				j--
			}
			if dt := st.apiT[i] - st.apiT[j]; dt >= 0.5 {
				peak = max(peak, (st.apiCPU[i]-st.apiCPU[j])/dt)
			}
		}
	}
	return total, peak
}
