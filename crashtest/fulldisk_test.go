package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// mountSmallExt4 mounts a fresh ext4 file system of size bytes (a loop-mounted image, so
// O_DIRECT works as on a real disk; no blocks reserved for root, which the node runs as in CI)
// and returns where; it skips the test where the machine
// does not allow it (not root, no loop devices).
func mountSmallExt4(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("loop mount not allowed here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// TestFullDiskOnARealFilesystem: on a small ext4 file system filled up by another file, an
// idempotent producer writes more than the space left. The node must stay up, answer
// KAFKA_STORAGE_ERROR (which the client retries), and once the other file is deleted take
// every record, with none lost or duplicated. "enospc" has no reserve, so segment writes meet
// ENOSPC; "reserve" keeps 32 MiB free with --min-free-bytes (the disk has 16 MiB free while the
// other file is there, over 100 MiB after), so writes are suspended before any fails.
func TestFullDiskOnARealFilesystem(t *testing.T) {
	for _, v := range []struct{ name, reserve string }{{"enospc", "0"}, {"reserve", "32MiB"}} {
		t.Run(v.name, func(t *testing.T) { testFullDisk(t, v.reserve) })
	}
}

func testFullDisk(t *testing.T, reserve string) {
	// 256 MiB: Pebble preallocates its WAL at 110% of its memtable (70 MiB).
	mnt := mountSmallExt4(t, 256<<20)
	n := &inlet{t: t, dir: filepath.Join(mnt, "data"), logPath: filepath.Join(t.TempDir(), "inlet.log"),
		args: []string{"--segment-bytes", "4MiB", "--min-free-bytes", reserve}}
	t.Cleanup(func() {
		if n.running() {
			n.kill()
		}
		if t.Failed() {
			t.Logf("inlet log tail (%s):\n%s", n.logPath, n.logTail(60))
		}
	})
	n.start()
	pid := n.cmd.Process.Pid

	// Leave 16 MiB free: the producer below writes 24 MiB.
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, free-16<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	adm, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(context.Background(), 4, 1, nil, "full"); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.DefaultProduceTopic("full"),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const records = 1536
	// Random values: the client compresses, and would squeeze repeated bytes into nothing.
	values := make([][]byte, records)
	src := rand.NewChaCha8([32]byte{1})
	for i := range values {
		values[i] = fmt.Appendf(nil, "%06d", i)
		values[i] = append(values[i], make([]byte, 16<<10)...)
		_, _ = src.Read(values[i][6:])
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range records {
		cl.Produce(context.Background(), &kgo.Record{Value: values[i]}, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		})
	}
	n.waitLogged("the disk is full", time.Minute)
	time.Sleep(500 * time.Millisecond) // the producer keeps retrying into the full disk
	if !n.running() || n.cmd.Process.Pid != pid {
		t.Fatal("the node stopped on a full disk")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush after space returned: %v", err)
	}
	if failed.Load() > 0 {
		out, _ := exec.Command("sh", "-c", "df -k "+mnt+"; du -ak "+mnt+" | sort -n | tail -8").CombinedOutput()
		t.Logf("the file system:\n%s", out)
		t.Fatalf("%d records failed, the first with %v", failed.Load(), firstErr.Load())
	}
	if !n.logged("writes resumed after a full disk") {
		t.Fatal("no resume logged")
	}
	got := readAll(t, n.addr(), "full")
	for i := range records {
		if c := got[string(values[i])]; c != 1 {
			t.Fatalf("record %d stored %d times", i, c)
		}
	}
	if len(got) != records {
		t.Fatalf("%d distinct records stored, want %d", len(got), records)
	}
	if !n.running() || n.cmd.Process.Pid != pid {
		t.Fatal("the node restarted")
	}
	b, _ := os.ReadFile(n.logPath)
	t.Logf("%d records, each once; the node logged the full disk %d times, a resume %d times",
		records, bytes.Count(b, []byte("the disk is full")), bytes.Count(b, []byte("writes resumed")))
}
