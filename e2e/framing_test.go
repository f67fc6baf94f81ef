package e2e

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// TestFramingGarbageClosesConnectionOnly guards the first tier of errors: a frame that cannot
// be trusted (absurd length prefix, unknown api key, unserved version, undecodable body)
// closes that connection without an answer, without allocating what the prefix claims, and
// without disturbing the server: a new connection is served.
func TestFramingGarbageClosesConnectionOnly(t *testing.T) {
	b := startBroker(t, nil)
	header := func(key, version int16) []byte {
		var h []byte
		h = binary.BigEndian.AppendUint16(h, uint16(key))
		h = binary.BigEndian.AppendUint16(h, uint16(version))
		h = binary.BigEndian.AppendUint32(h, 1) // correlation id
		h = binary.BigEndian.AppendUint16(h, 0) // empty client id
		return h
	}
	framed := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"length prefix 2 GiB - 1", []byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 0}},
		{"length prefix 2 GiB (negative as int32)", []byte{0x80, 0, 0, 0, 0, 18, 0, 0}},
		{"length prefix -1", []byte{0xff, 0xff, 0xff, 0xff}},
		{"length prefix just over 100 MiB", binary.BigEndian.AppendUint32(nil, 100<<20+1)},
		{"length prefix 0", []byte{0, 0, 0, 0}},
		{"length prefix 7", append([]byte{0, 0, 0, 7}, make([]byte, 7)...)},
		{"unknown api key", framed(header(999, 0))},
		{"inter-broker api key (LeaderAndIsr)", framed(header(4, 0))},
		{"Produce v2 (legacy message sets)", framed(header(0, 2))},
		{"Produce v13 (topic ids)", framed(header(0, 13))},
		{"Fetch v3", framed(header(1, 3))},
		{"Metadata body truncated", framed(append(header(3, 1), 0, 0, 0, 5))},
		{"Produce body truncated", framed(append(header(0, 3), 0xff, 0xff, 0, 1))},
		{"header truncated in the client id", framed([]byte{0, 18, 0, 0, 0, 0, 0, 1, 0, 9, 'a'})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rc := dialRaw(t, b.addr)
			rc.write(c.bytes)
			rc.expectClosed()
			runtime.ReadMemStats(&after)
			// The broker runs in this process: had it believed a 2 GiB prefix, TotalAlloc
			// would show it.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("%d MiB allocated while refusing the frame", grew>>20)
			}
			dialRaw(t, b.addr).alive()
		})
	}
}

// TestFramingSplitAcrossWritesIsReassembled guards the frame assembler against partial reads:
// a request that arrives one byte at a time, and two requests whose boundary falls inside a
// write, are answered like any others.
func TestFramingSplitAcrossWritesIsReassembled(t *testing.T) {
	b := startBroker(t, nil)
	rc := dialRaw(t, b.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "inlet-e2e", "1"

	one, corr := rc.frame(req)
	for i := range one {
		rc.write(one[i : i+1])
		time.Sleep(time.Millisecond)
	}
	if resp := rc.recv(req, corr).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("byte-at-a-time request: error %d", resp.ErrorCode)
	}

	// A produce frame larger than gnet's read buffer, then an ApiVersions frame, written in
	// chunks that straddle the boundary.
	b.createTopic("split", 1)
	s := plainBatch(1, 1000, "split")
	s.records[0].value = make([]byte, 900<<10)
	preq := produceReq(9, -1, "split", 0, s.encode())
	pframe, pcorr := rc.frame(preq)
	aframe, acorr := rc.frame(req)
	all := append(pframe, aframe...)
	for len(all) > 0 {
		n := min(len(all), 64<<10+7)
		rc.write(all[:n])
		all = all[n:]
	}
	if p := rc.recv(preq, pcorr).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Errorf("chunked produce: error %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
	rc.recv(req, acorr)
}

// TestFramingDisconnectMidFrameReleasesBudget guards the in-flight budget against leaks: a
// client that announces a large frame and disconnects before sending it must give its share
// back, or (with a small budget) the event loop would wait forever and stop serving.
func TestFramingDisconnectMidFrameReleasesBudget(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.InflightBudget = 1 << 20
		c.Workers = 1 // one loop: a leaked budget would stall every connection
	})
	for i := 0; i < 8; i++ {
		rc := dialRaw(t, b.addr)
		rc.write(append(binary.BigEndian.AppendUint32(nil, 900<<10), 0, 18, 0, 3, 0, 0))
		time.Sleep(10 * time.Millisecond) // let the loop take the frame's budget
		rc.c.Close()
	}
	dialRaw(t, b.addr).alive()
}
