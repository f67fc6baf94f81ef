package conn

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// testLimitsServer is a node with package server's defaults for what the limits read.
func testLimitsServer(t *testing.T) (*Node, *bytes.Buffer) {
	var logs bytes.Buffer
	s := &Node{cfg: Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), FailedAuthenticationDelay: 100 * time.Millisecond}}
	s.log = s.cfg.Logger
	s.connTab.init()
	return s, &logs
}

// TestFailedAuthenticationDelayGrows: 100 ms, then doubled for every further failure from the
// same address, at most 5 s; another address starts at 100 ms; a success starts over.
func TestFailedAuthenticationDelayGrows(t *testing.T) {
	s, _ := testLimitsServer(t)
	var got []time.Duration
	for range 8 {
		got = append(got, s.failedAuthDelay("10.0.0.1"))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	if d := s.failedAuthDelay("10.0.0.2"); d != 100*time.Millisecond {
		t.Errorf("another address: %v", d)
	}
	s.authSucceeded("10.0.0.1")
	if d := s.failedAuthDelay("10.0.0.1"); d != 100*time.Millisecond {
		t.Errorf("after a success: %v", d)
	}
}

// TestRefusalsAreLoggedOncePerAddress: a client refused again and again is one log line a
// minute, not one per attempt; another address or another reason gets its own line.
func TestRefusalsAreLoggedOncePerAddress(t *testing.T) {
	s, logs := testLimitsServer(t)
	for range 100 {
		s.refused("10.0.0.1:5000", "max.connections reached")
	}
	s.refused("10.0.0.2:5000", "max.connections reached")
	s.refused("10.0.0.1:5001", "closing connection: bad request header")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), logs)
	}
	if !strings.Contains(lines[0], `msg="refused: max.connections reached" remote=10.0.0.1:5000`) ||
		!strings.Contains(lines[2], `msg="closing connection: bad request header"`) {
		t.Errorf("log:\n%s", logs)
	}
}

func TestParsePerIPOverrides(t *testing.T) {
	m, err := ParsePerIPOverrides("127.0.0.1:200, ::1:5,[fe80::1]:0")
	if err != nil || m["127.0.0.1"] != 200 || m["::1"] != 5 || m["fe80::1"] != 0 || len(m) != 3 {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"localhost:5", "127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1", ":5"} {
		if _, err := ParsePerIPOverrides(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if m, err := ParsePerIPOverrides(""); err != nil || len(m) != 0 {
		t.Errorf("empty: %v %v", m, err)
	}
}
