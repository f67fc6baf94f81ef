package crashtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9AndLostDiskKeepEveryAcknowledgedDisklessRecord: a node on versitygw whose every
// start deletes nothing but finds an empty data directory and passes --restore-from-remote
// (the first start included: an empty bucket makes a new node) serves a diskless topic that
// idempotent producers write to flat out; it is SIGKILLed and its data directory deleted three
// times, each time restored from the bucket alone. After the last restore every
// acknowledged record is read once, in order, from offset 0: nothing acknowledged was lost
// with the disk, and the producers' retries across the losses stored nothing twice (their
// windows came back from the commit objects).
func TestKill9AndLostDiskKeepEveryAcknowledgedDisklessRecord(t *testing.T) {
	s3 := versityEnv(t)
	n := startInlet(t, "--s3-bucket", s3.Bucket, "--s3-endpoint", s3.Endpoint, "--s3-path-style", "--s3-prefix", "diskless/",
		"--restore-from-remote", "--bucket-lease-ms", "1000") // a restart after a SIGKILL waits one lease for the old one

	const topic, partitions = "orders", 2
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	admin.Close()

	np := startNumberedProducers(t, ctx, n.addr(), topic, partitions, 150*time.Second)
	for k := 1; k <= 3; k++ {
		time.Sleep(1500 * time.Millisecond)
		n.kill()
		if err := os.RemoveAll(n.dir); err != nil {
			t.Fatal(err)
		}
		n.restart()
	}
	time.Sleep(time.Second)
	np.finish(t, ctx)

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < partitions; p++ {
		hw, _ := listOffsets(t, ctx, cl, topic, p)
		got := readPartition(t, ctx, n.addr(), topic, p, hw)
		want := np.check(t, p, got)
		if want == 0 {
			t.Fatalf("partition %d: nothing acknowledged", p)
		}
		t.Logf("partition %d: %d acknowledged, %d read from 0 to %d after three lost disks", p, want, len(got), hw)
	}
}
