package segfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
)

func TestCrashKeepsOnlySyncedDataAndNames(t *testing.T) {
	m := NewCrashableMem()
	m.MkdirAll("/d")
	a, _ := m.Create("/d/a")
	a.WriteV([][]byte{[]byte("hello")}, 0)
	m.SyncDir("/d")
	a.Datasync()
	a.WriteV([][]byte{[]byte(" world")}, 5) // unsynced
	b, _ := m.Create("/d/b")                // name unsynced
	b.WriteV([][]byte{[]byte("x")}, 0)
	b.Datasync()

	c := m.Crash(SyncedOnly, nil, nil)
	files := c.Files()
	if len(files) != 1 || string(files["/d/a"]) != "hello" {
		t.Fatalf("after crash: %q", files)
	}
	// The original goes on unchanged.
	if got := m.Files(); string(got["/d/a"]) != "hello world" || string(got["/d/b"]) != "x" {
		t.Fatalf("original changed: %q", got)
	}
	// A removal not followed by SyncDir is undone by a crash.
	m.Remove("/d/a")
	if _, ok := m.Crash(SyncedOnly, nil, nil).Files()["/d/a"]; !ok {
		t.Fatal("unsynced removal survived the crash")
	}
	m.SyncDir("/d")
	if _, ok := m.Crash(SyncedOnly, nil, nil).Files()["/d/a"]; ok {
		t.Fatal("synced removal undone by the crash")
	}
}

func TestTornPrefixKeepsAPrefixOfTheUnsyncedWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	full := bytes.Repeat([]byte("abcdefgh"), 1000)
	for range 200 {
		m := NewCrashableMem()
		m.MkdirAll("/d")
		f, _ := m.Create("/d/f")
		m.SyncDir("/d")
		f.WriteV([][]byte{full[:3000]}, 0)
		f.Datasync()
		f.WriteV([][]byte{full[3000:5000]}, 3000)
		f.WriteV([][]byte{full[5000:]}, 5000)
		got := m.Crash(TornPrefix, rng, nil).Files()["/d/f"]
		if len(got) < 3000 || !bytes.Equal(got, full[:len(got)]) {
			t.Fatalf("torn file of %d bytes is not a prefix of at least the synced 3000", len(got))
		}
	}
}

func TestDirectWritesMustBeAligned(t *testing.T) {
	m := NewCrashableMem()
	m.MkdirAll("/d")
	f, _ := m.Create("/d/f")
	d, _ := m.OpenDirect("/d/f")
	if _, err := d.WriteV([][]byte{make([]byte, 100)}, 0); err == nil {
		t.Fatal("unaligned length accepted")
	}
	if _, err := d.WriteV([][]byte{make([]byte, BlockSize)}, 100); err == nil {
		t.Fatal("unaligned offset accepted")
	}
	if end, err := d.WriteV([][]byte{make([]byte, BlockSize)}, BlockSize); err != nil || end != 2*BlockSize {
		t.Fatalf("aligned write: %d %v", end, err)
	}
	if n, _ := f.Size(); n != 2*BlockSize {
		t.Fatalf("size %d", n)
	}
}

func TestInjectedErrorsChangeNothing(t *testing.T) {
	m := NewCrashableMem()
	m.MkdirAll("/d")
	f, _ := m.Create("/d/f")
	m.Inject(func(op Op, name string) error {
		if op == OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	if _, err := f.WriteV([][]byte{[]byte("x")}, 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write: %v", err)
	}
	if n, _ := f.Size(); n != 0 {
		t.Fatalf("failed write left %d bytes", n)
	}
	m.Inject(nil)
	if _, err := f.WriteV([][]byte{[]byte("x")}, 0); err != nil {
		t.Fatal(err)
	}
}

func TestProcessKillKeepsUnsyncedDataForALaterCrashToLose(t *testing.T) {
	m := NewCrashableMem()
	m.MkdirAll("/d")
	f, _ := m.Create("/d/f")
	m.SyncDir("/d")
	f.WriteV([][]byte{[]byte("synced")}, 0)
	f.Datasync()
	f.WriteV([][]byte{[]byte(" cached")}, 6)
	g, _ := m.Create("/d/g") // name not synced

	k := m.Crash(ProcessKill, nil, nil)
	got := k.Files()
	if _, ok := got["/d/g"]; string(got["/d/f"]) != "synced cached" || !ok {
		t.Fatalf("after a process kill: %q", got)
	}
	got = k.Crash(SyncedOnly, nil, nil).Files()
	if _, ok := got["/d/g"]; string(got["/d/f"]) != "synced" || ok {
		t.Fatalf("power loss after the kill: %q", got)
	}
	_ = g
}

func TestShortWriteKeepsItsPrefix(t *testing.T) {
	m := NewCrashableMem()
	m.MkdirAll("/d")
	f, _ := m.Create("/d/f")
	m.Inject(func(op Op, name string) error { return &ShortWrite{N: 3, Err: syscall.ENOSPC} })
	end, err := f.WriteV([][]byte{[]byte("hello")}, 0)
	if !errors.Is(err, syscall.ENOSPC) || end != 3 || string(m.Files()["/d/f"]) != "hel" {
		t.Fatalf("short write: end %d, err %v, file %q", end, err, m.Files()["/d/f"])
	}
}
