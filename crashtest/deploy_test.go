package crashtest

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// TestContainerfile checks deploy/Containerfile without building it (there may be no
// container engine): the builder runs the Makefile's build target and the runtime image
// starts the binary that target writes; the process is not root; the data directory given
// to inlet is the image's volume; the listener's port is exposed; and inlet accepts the
// image's flags (run here with --version, which parses them and exits).
func TestContainerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, one per entry: continuation lines joined, comments dropped.
	var ins [][2]string
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kw, rest, _ := strings.Cut(line, " ")
		ins = append(ins, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
	}
	last := func(kw string) string {
		for i := len(ins) - 1; i >= 0; i-- {
			if ins[i][0] == kw {
				return ins[i][1]
			}
		}
		t.Fatalf("Containerfile has no %s", kw)
		return ""
	}
	execForm := func(kw string) []string {
		var args []string
		if err := json.Unmarshal([]byte(last(kw)), &args); err != nil {
			t.Fatalf("%s is not in exec form (a JSON array; the shell form would keep SIGTERM from inlet): %v", kw, err)
		}
		return args
	}

	// The Makefile's build target writes bin/inlet; the builder runs it in its WORKDIR and the
	// runtime image copies that file to the path ENTRYPOINT starts.
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^build:\n(\t.*\n)*\t\$\(GO\) build .*-o bin/inlet \./cmd/inlet\n`).Match(mk) {
		t.Fatal("the Makefile's build target no longer writes bin/inlet from ./cmd/inlet: update deploy/Containerfile and this test")
	}
	if !slices.ContainsFunc(ins, func(in [2]string) bool { return in[0] == "RUN" && strings.Contains(in[1], "make build") }) {
		t.Error("the builder does not run make build")
	}
	entry, cmd := execForm("ENTRYPOINT"), execForm("CMD")
	copyLine := "--from=build " + filepath.Join(last("WORKDIR"), "bin/inlet") + " " + entry[0]
	if !slices.Contains(ins, [2]string{"COPY", copyLine}) {
		t.Errorf("no COPY %s (the Makefile's bin/inlet to the ENTRYPOINT's binary)", copyLine)
	}
	if u := strings.Split(last("USER"), ":")[0]; u == "" || u == "root" || u == "0" {
		t.Errorf("USER %q runs as root", last("USER"))
	}

	flags := map[string]string{}
	for _, a := range append(slices.Clone(entry[1:]), cmd...) {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			t.Fatalf("flag %q: write flags as --name=value so this test can read them", a)
		}
		flags[k] = v
	}
	if vol := last("VOLUME"); flags["--data-dir"] != vol {
		t.Errorf("--data-dir is %q, the VOLUME is %q", flags["--data-dir"], vol)
	}
	host, port, err := net.SplitHostPort(flags["--listen"])
	if err != nil || host != "0.0.0.0" {
		t.Errorf("--listen %q: want 0.0.0.0:PORT (reachable from outside the container)", flags["--listen"])
	}
	if !slices.Contains(strings.Fields(last("EXPOSE")), port) {
		t.Errorf("the listener's port %s is not in EXPOSE %s", port, last("EXPOSE"))
	}
	out, err := exec.Command(inletBin, append(append(slices.Clone(entry[1:]), cmd...), "--version")...).CombinedOutput()
	if err != nil {
		t.Errorf("inlet refuses the image's flags: %v\n%s", err, out)
	}
}
