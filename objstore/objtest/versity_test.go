package objtest

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recTB records a Skip or Fatal instead of ending the test, so the missing-binary paths can be
// checked; both end the calling goroutine as the real ones do.
type recTB struct {
	testing.TB
	skipped, fatal string
}

func (r *recTB) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...); runtime.Goexit() }
func (r *recTB) Fatalf(f string, a ...any) { r.fatal = fmt.Sprintf(f, a...); runtime.Goexit() }

func startWithout(t *testing.T, ci string) *recTB {
	t.Setenv("PATH", "")
	t.Setenv("GOPATH", t.TempDir())
	t.Setenv("CI", ci)
	r := &recTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartVersity(r)
	}()
	<-done
	return r
}

func TestMissingBinarySkips(t *testing.T) {
	r := startWithout(t, "")
	if r.skipped == "" || r.fatal != "" {
		t.Fatalf("without versitygw and without CI: skipped %q, fatal %q; want a skip", r.skipped, r.fatal)
	}
}

func TestMissingBinaryFailsUnderCI(t *testing.T) {
	r := startWithout(t, "true")
	if r.fatal == "" || r.skipped != "" {
		t.Fatalf("without versitygw under CI: skipped %q, fatal %q; want a failure", r.skipped, r.fatal)
	}
}

// TestStopRestart: Stop frees the port (the process is gone), Restart serves on the same port
// again, and Stop twice is harmless.
func TestStopRestart(t *testing.T) {
	s := StartVersity(t)
	s.Stop()
	s.Stop()
	if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", s.addr)
	}
	s.Restart()
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	c.Close()
}

// TestPosixKeysAreNotNested pins what the package comment says of the posix backend: a key
// cannot also be another key's directory. If versitygw lifts this, the comment goes.
func TestPosixKeysAreNotNested(t *testing.T) {
	s := StartVersity(t)
	b := s.Open("nest")
	ctx := t.Context()
	if err := b.Put(ctx, "a", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "a/b", strings.NewReader("x"), 1); err == nil {
		t.Fatal(`versitygw stored "a/b" beside "a"`)
	}
}
