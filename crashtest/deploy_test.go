package crashtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitVerifies checks deploy/inlet.service with systemd-analyze verify (unknown or
// misspelled directives, bad values, a missing binary all fail it). The unit names the
// installed path, /usr/local/bin/inlet; the copy checked here names the binary this package
// built instead, which is the one change.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is missing: make test installs it (scripts/setup.sh)")
	}
	unit, err := os.ReadFile(filepath.Join("..", "deploy", "inlet.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/inlet ") {
		t.Fatal("the unit's ExecStart does not name /usr/local/bin/inlet")
	}
	copyPath := filepath.Join(t.TempDir(), "inlet.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/inlet", inletBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestVersion: inlet --version names the version and the commit, and exits 0.
func TestVersion(t *testing.T) {
	out, err := exec.Command(inletBin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "inlet ") || !strings.Contains(string(out), "(commit ") {
		t.Fatalf("inlet --version: %v\n%s", err, out)
	}
}
