package measure

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MemoryCgroup holds one server under a memory limit, as a container's: the kernel reclaims the
// cgroup's page cache when it reaches the limit, and kills a process only when what it cannot
// reclaim does not fit. Version 1 (memory controller at /sys/fs/cgroup/memory) or version 2.
type MemoryCgroup struct {
	dir string
	v2  bool
	// binary is the server's own copy of bin/coredns: its pages are read into the page cache
	// from inside the cgroup and charged to it, as a container's image files are.
	binary string
}

// NewMemoryCgroup makes a cgroup limited to limit bytes.
func NewMemoryCgroup(name string, limit int64) (*MemoryCgroup, error) {
	c := &MemoryCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c = &MemoryCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("a memory cgroup (needs root): %w", err)
	}
	c.binary = filepath.Join(os.TempDir(), name+"-coredns")
	if err := copyFile(CoreDNSBinary, c.binary, 0o755); err != nil {
		c.Remove()
		return nil, err
	}
	file, value := "memory.limit_in_bytes", strconv.FormatInt(limit, 10)
	if c.v2 {
		file = "memory.max"
	} else {
		// Best effort: newer kernels refuse it (the process joins within a moment of its start anyway).
		_ = c.write("memory.move_charge_at_immigrate", "3")
	}
	if err := c.write(file, value); err != nil {
		c.Remove()
		return nil, err
	}
	return c, nil
}

func (c *MemoryCgroup) write(file, value string) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644)
}

// procs is the file a process writes its PID to, to join the cgroup.
func (c *MemoryCgroup) procs() string { return filepath.Join(c.dir, "cgroup.procs") }

// CgroupStats are what the kernel counted: the highest usage, how often usage reached the limit
// (and the kernel reclaimed), and how many processes it killed for memory.
type CgroupStats struct {
	Peak                float64
	LimitHits, OOMKills int64
}

// Stats reads what the kernel counted in the cgroup.
func (c *MemoryCgroup) Stats() (CgroupStats, error) {
	var s CgroupStats
	read := func(file string) (string, error) {
		b, err := os.ReadFile(filepath.Join(c.dir, file))
		return strings.TrimSpace(string(b)), err
	}
	keyed := func(text, key string) int64 {
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == key {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return 0
	}
	peakFile, events := "memory.max_usage_in_bytes", "memory.oom_control"
	if c.v2 {
		peakFile, events = "memory.peak", "memory.events"
	}
	peak, err := read(peakFile)
	if err != nil {
		return s, err
	}
	p, err := strconv.ParseFloat(peak, 64)
	if err != nil {
		return s, fmt.Errorf("%s: %q", peakFile, peak)
	}
	s.Peak = p
	ev, err := read(events)
	if err != nil {
		return s, err
	}
	s.OOMKills = keyed(ev, "oom_kill")
	if c.v2 {
		s.LimitHits = keyed(ev, "max")
	} else {
		failcnt, err := read("memory.failcnt")
		if err != nil {
			return s, err
		}
		s.LimitHits, _ = strconv.ParseInt(failcnt, 10, 64)
	}
	return s, nil
}

// Remove deletes the cgroup once its processes have exited, and the binary's copy.
func (c *MemoryCgroup) Remove() error {
	if c.binary != "" {
		os.Remove(c.binary)
	}
	err := os.Remove(c.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// copyFile copies a file and drops the copy from the page cache, so that whoever reads it next
// is charged for its pages.
func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// ResetPeak starts the cgroup's peak usage over from its usage now (version 1; version 2 resets
// memory.peak only for the file descriptor that wrote it, so there the peak is since the start).
func (c *MemoryCgroup) ResetPeak() error {
	if c.v2 {
		return nil
	}
	return c.write("memory.max_usage_in_bytes", "0")
}
