package crashtest

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBatchClaimingTwoBillionRecordsIsRefused is the trusted-batch-header attack against
// the real binary: a CRC-valid batch whose header claims 2,000,000,000 records (the last offset
// delta agreeing) and holds one used to move the high watermark by two billion. Now it is
// INVALID_RECORD, the high watermark stays where it was, the connection and a fresh one keep
// being answered, and after a restart the partition still ends where it did.
func TestBatchClaimingTwoBillionRecordsIsRefused(t *testing.T) {
	n := startInlet(t)
	const topic = "batch-claims"
	rc := dialRaw(t, n.addr())
	if p := produceResult(t, rc.roundTrip(produceRequest(topic, 0, idempotentBatch(-1, -1, -1, 3, "ok"))).(*kmsg.ProduceResponse)); p.ErrorCode != 0 {
		t.Fatalf("valid batch: error %d", p.ErrorCode)
	}
	if hw := rc.listLatest(topic, 0); hw != 3 {
		t.Fatalf("high watermark %d after a batch of 3, want 3", hw)
	}
	lie := idempotentBatch(-1, -1, -1, 1, "lie")
	binary.BigEndian.PutUint32(lie[57:], 2_000_000_000)   // record count
	binary.BigEndian.PutUint32(lie[23:], 2_000_000_000-1) // last offset delta
	binary.BigEndian.PutUint32(lie[17:], crc32.Checksum(lie[21:], crc32.MakeTable(crc32.Castagnoli)))
	p := produceResult(t, rc.roundTrip(produceRequest(topic, 0, lie)).(*kmsg.ProduceResponse))
	if p.ErrorCode != 87 { // INVALID_RECORD
		t.Fatalf("batch claiming 2,000,000,000 records: error %d, want INVALID_RECORD (87)", p.ErrorCode)
	}
	if p.ErrorMessage == nil || *p.ErrorMessage == "" {
		t.Errorf("refusal without a message (Produce v%d)", produceVersion)
	}
	if hw := rc.listLatest(topic, 0); hw != 3 {
		t.Fatalf("high watermark %d after the refused batch, want 3", hw)
	}
	rc.apiVersions()
	dialRaw(t, n.addr()).apiVersions()

	if st, _ := n.terminate(20 * time.Second); st == nil {
		t.Fatal("inlet did not exit within 20 s of SIGTERM")
	}
	n.restart()
	rc = dialRaw(t, n.addr())
	if hw := rc.listLatest(topic, 0); hw != 3 {
		t.Fatalf("high watermark %d after a restart, want 3", hw)
	}
}
