package apicost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// logFollower reads a server's log as it grows and finds the audits' log lines.
type logFollower struct {
	path string
	off  int64
	rest string
}

// auditLine is one audit's log line: when it was seen, what the audit said it took, and whether
// it found the cluster in step.
type auditLine struct {
	end    time.Time
	took   time.Duration
	inStep bool
	line   string
}

func newLogFollower(path string) *logFollower {
	f := &logFollower{path: path}
	if st, err := os.Stat(path); err == nil {
		f.off = st.Size()
	}
	return f
}

var auditEnd = regexp.MustCompile(`audit: (in step with the API server|\d+ objects repaired) \(([^)]+)\)\s*$`)

// next waits up to limit for the next audit's log line (polling every 20 ms).
func (f *logFollower) next(ctx context.Context, s *measure.Server, limit time.Duration) (auditLine, error) {
	deadline := time.Now().Add(limit)
	for {
		b, err := f.read()
		if err != nil {
			return auditLine{}, err
		}
		now := time.Now()
		f.rest += b
		for {
			i := strings.IndexByte(f.rest, '\n')
			if i < 0 {
				break
			}
			line := f.rest[:i]
			f.rest = f.rest[i+1:]
			if m := auditEnd.FindStringSubmatch(line); m != nil {
				took, err := time.ParseDuration(m[2])
				if err != nil {
					return auditLine{}, fmt.Errorf("audit log line %q: %w", line, err)
				}
				return auditLine{end: now, took: took, inStep: strings.HasPrefix(m[1], "in step"), line: line}, nil
			}
			if strings.Contains(line, "audit: ") && strings.Contains(line, "[WARNING]") {
				return auditLine{}, fmt.Errorf("the audit failed: %s", line)
			}
		}
		if e := s.Exited(); e != "" {
			return auditLine{}, fmt.Errorf("exited: %s", e)
		}
		if now.After(deadline) {
			return auditLine{}, errors.New("no audit within " + limit.String())
		}
		if err := measure.Sleep(ctx, 20*time.Millisecond); err != nil {
			return auditLine{}, err
		}
	}
}

func (f *logFollower) read() (string, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(fh)
	f.off += int64(len(b))
	return string(b), err
}
