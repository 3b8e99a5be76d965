package ops

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpsToolsRunIsCurrent: promtool's and helm's checks (make ops-tools) are not run by make test;
// test/ops/ops-tools.txt, written by their last passing run, names the sha256 of every file they
// read. A file changed since then has not been checked: the test fails until make ops-tools runs
// again and its output is committed.
func TestOpsToolsRunIsCurrent(t *testing.T) {
	f, err := os.Open("ops-tools.txt")
	if err != nil {
		t.Fatalf("run make ops-tools and commit test/ops/ops-tools.txt: %v", err)
	}
	defer f.Close()
	var files int
	var passed bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "PASS" {
			passed = true
		}
		sum, path, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != sha256.Size*2 || strings.HasPrefix(line, "#") {
			continue
		}
		files++
		raw, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%s, checked by make ops-tools: %v", path, err)
			continue
		}
		if got := sha256.Sum256(raw); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s changed since make ops-tools checked it: run make ops-tools and commit test/ops/ops-tools.txt", path)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if files == 0 || !passed {
		t.Errorf("test/ops/ops-tools.txt names %d files and passed=%v: not the output of a passing make ops-tools", files, passed)
	}
}
