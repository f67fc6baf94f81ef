package batchlog

import (
	"testing"
	"time"
)

// TestCloseWaitsForAPassUnderWay: Close returns only after a pass holding the log
// (Log.RunPass) has returned, and a pass asked for after Close does not run.
func TestCloseWaitsForAPassUnderWay(t *testing.T) {
	l := openTemp(t, t.TempDir())
	inPass, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = l.RunPass(func(ps *Pass) error {
			close(inPass)
			<-release
			if !ps.Closing() {
				t.Error("the pass does not see the log closing")
			}
			return nil
		})
	}()
	<-inPass
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a pass was under way")
	case <-time.After(50 * time.Millisecond):
	}
	for !l.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := l.RunPass(func(*Pass) error { ran = true; return nil }); err != nil || ran {
		t.Fatalf("a pass after Close: ran %v, err %v", ran, err)
	}
}
