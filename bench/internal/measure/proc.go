package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Mem is a process's memory: VmRSS and the Go heap (go_memstats_heap_alloc_bytes), in bytes.
type Mem struct{ RSS, Heap float64 }

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// ProcCPU is the process's user + system CPU time so far, in seconds.
func ProcCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command may hold spaces and parentheses: the fields start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return (u + s) / clockTicks, nil
}

// SampledPeak is the highest value of a /proc/PID/status field read every 20 ms until stop.
type SampledPeak struct{ Max float64 }

// Sample samples pid's field until stop is closed.
func (s *SampledPeak) Sample(pid int, field string, stop chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if v, err := ProcStatusBytes(pid, field); err == nil && v > s.Max {
			s.Max = v
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// ProcStatusBytes reads a kB field of /proc/PID/status, in bytes.
func ProcStatusBytes(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseFloat(f[0], 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
