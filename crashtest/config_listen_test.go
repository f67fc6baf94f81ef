package crashtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfigListenerBindsItsOwnAddress: a node started from a config file whose only listener
// is a plaintext one on a port of its own (and no --listen) listens there, and not on the
// --listen default (127.0.0.1:9092). It used to bind the default: the server's Start handed gnet the
// caller's Config.Listen instead of the address setupListeners took from the first listener,
// so `address: 0.0.0.0:9092` quietly listened on loopback only.
func TestConfigListenerBindsItsOwnAddress(t *testing.T) {
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		t.Skip("needs /proc/<pid>/net/tcp to list the process's listening sockets")
	}
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port := freePort(t)
		lastErr = configListenerOnce(t, port)
		if lastErr == nil {
			return
		}
		if !strings.Contains(lastErr.Error(), "exited before ready") {
			t.Fatal(lastErr)
		}
		t.Logf("attempt %d on port %d: %v", attempt, port, lastErr) // the free port was taken
	}
	t.Fatalf("could not start after %d attempts: %v", startAttempts, lastErr)
}

func configListenerOnce(t *testing.T, port int) error {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "inlet.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "listeners:\n  - name: plain\n    address: 127.0.0.1:%d\n    security_protocol: PLAINTEXT\n", port), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "inlet.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// No --listen and no --advertise: the config file's listener is the only address given.
	cmd := exec.Command(inletBin, "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	logTail := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	// The node logs "listening" once its listener is bound.
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited before ready: %v\n%s", cmd.ProcessState, logTail())
		default:
		}
		if strings.Contains(logTail(), "msg=listening") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v:\n%s", readyTimeout, logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ports, err := listeningPorts(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pid %d listens on ports %v; its log:\n%s", cmd.Process.Pid, ports, logTail())
	if !ports[port] {
		t.Errorf("the node does not listen on the config file's port %d (it listens on %v)", port, ports)
	}
	if ports[9092] {
		t.Errorf("the node listens on the --listen default's port 9092 as well")
	}
	// And that port is the Kafka listener: ApiVersions is answered there.
	rc := dialRaw(t, "127.0.0.1:"+strconv.Itoa(port))
	defer rc.c.Close()
	if err := rc.tryAPIVersions(); err != nil {
		t.Errorf("ApiVersions on the config file's port %d: %v", port, err)
	}
	return nil
}

// listeningPorts returns the local ports of the TCP sockets (IPv4 and IPv6) that process pid
// holds in the LISTEN state: its socket inodes (/proc/pid/fd) matched against the kernel's
// socket table (/proc/pid/net/tcp, tcp6).
func listeningPorts(pid int) (map[int]bool, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header line
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] { // 0A: TCP_LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil {
				ports[int(p)] = true
			}
		}
		f.Close()
	}
	return ports, nil
}
