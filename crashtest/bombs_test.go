package crashtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decompression bombs against the real binary: 16 connections at once send batches of a
// few hundred KiB at most that inflate past the bound (64 MiB, or 1000 times the batch), in
// every codec, while a kgo producer and fresh connections are answered (p99 under 1 s). Every
// bomb is refused, and the node's resident set, sampled all along and read as its peak
// (VmHWM) at the end, stays under --memory-limit + 64 MiB. The node's CPU time per refused
// bomb is logged. Under the race detector only the refusals and the bystander are checked.
//
// CRASHTEST_INLET_BIN names another build to run instead (to measure an older one).

const (
	bombMemoryLimit = 320 << 20
	bombConns       = 16
	bombRounds      = 40 // batches per connection
)

// bomb is one batch that must be refused.
type bomb struct {
	name  string
	batch []byte
}

// zeroRecords is n records of size zero bytes each, encoded as a batch's records.
func zeroRecords(n, size int) []byte {
	var raw []byte
	v := make([]byte, size)
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	return raw
}

// rawBatch frames payload (already compressed with codec) as a batch of n records.
func rawBatch(codec int16, n int32, payload []byte) []byte {
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, Attributes: codec, LastOffsetDelta: n - 1, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: n, Records: payload}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func bombs(t *testing.T) []bomb {
	t.Helper()
	const n = 65 // records of 1 MiB of zeros: valid, and 65 MiB decompressed
	records := zeroRecords(n, 1<<20)
	var gz bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	gw.Write(records)
	gw.Close()
	var lz bytes.Buffer
	lw := lz4.NewWriter(&lz)
	_ = lw.Apply(lz4.CompressionLevelOption(lz4.Level9))
	lw.Write(records)
	lw.Close()
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	zs := zenc.EncodeAll(records, nil)
	// One zstd frame whose window is its whole content (63 MiB of valid records): a decoder
	// that trusts the header allocates it.
	bigWin, _ := zstd.NewWriter(nil, zstd.WithWindowSize(64<<20), zstd.WithSingleSegment(true))
	zsBig := bigWin.EncodeAll(zeroRecords(63, 1<<20), nil)
	zeros := make([]byte, 64<<20)
	var gzZeros bytes.Buffer
	gw, _ = gzip.NewWriterLevel(&gzZeros, gzip.BestCompression)
	gw.Write(zeros)
	gw.Close()
	s2Zeros := s2.Encode(nil, zeros) // S2's repeats: any ratio, which no snappy encoder writes
	xerial := append([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}, binary.BigEndian.AppendUint32(nil, uint32(len(s2Zeros)))...)
	xerial = append(xerial, s2Zeros...)
	out := []bomb{
		{"gzip records", rawBatch(1, n, gz.Bytes())},
		{"gzip zeros", rawBatch(1, 1, gzZeros.Bytes())},
		{"lz4 records", rawBatch(3, n, lz.Bytes())},
		{"zstd records", rawBatch(4, n, zs)},
		{"zstd single-segment window", rawBatch(4, 63, zsBig)},
		{"snappy s2 repeats", rawBatch(2, 1, s2Zeros)},
		{"snappy xerial s2 repeats", rawBatch(2, 1, xerial)},
	}
	for _, b := range out {
		t.Logf("bomb %-28s %8d bytes on the wire", b.name, len(b.batch))
	}
	return out
}

// procStat is the node's resident set (VmRSS) and CPU time (utime + stime).
func procStat(pid int) (rss int64, cpu time.Duration) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			cpu = time.Duration(u+k) * (time.Second / 100) // USER_HZ
		}
	}
	return rss, cpu
}

// sendBombs sends rounds batches from bs over one connection, one request at a time, and
// returns the error code each got (-1: no answer).
func sendBombs(addr, topic string, bs []bomb, rounds int, offset int) (codes []int16, err error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("crashtest-bomber"))
	for i := range rounds {
		b := bs[(i+offset)%len(bs)]
		frame := f.AppendRequest(nil, produceRequest(topic, 0, b.batch), int32(i+1))
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(frame); err != nil {
			return codes, fmt.Errorf("%s: write: %w", b.name, err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return codes, fmt.Errorf("%s: read: %w", b.name, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return codes, fmt.Errorf("%s: read: %w", b.name, err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(produceVersion)
		if err := resp.ReadFrom(body[4:]); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return codes, fmt.Errorf("%s: reply: %v", b.name, err)
		}
		codes = append(codes, resp.Topics[0].Partitions[0].ErrorCode)
	}
	return codes, nil
}

func TestDecompressionBombsStayWithinMemory(t *testing.T) {
	if b := os.Getenv("CRASHTEST_INLET_BIN"); b != "" {
		inletBin = b
	}
	bs := bombs(t)
	// Under the race detector the node inflates ten times slower and its shadow memory
	// multiplies the resident set: fewer bombs, and the bound is not checked.
	rounds := bombRounds
	if raceEnabled {
		rounds = 4
	}
	n := startInlet(t, "--memory-limit", strconv.Itoa(bombMemoryLimit))
	pid := n.cmd.Process.Pid
	const topic = "bombs"
	by := newBystander(t, n.addr(), n.addr(), topic+"-bystander", 100)
	// The topic exists before the bombs: their refusals, not auto-creation, are measured.
	if _, err := sendBombs(n.addr(), topic, bs[:1], 1, 0); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var peakSampled int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if rss, _ := procStat(pid); rss > peakSampled {
				peakSampled = rss
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	_, cpu0 := procStat(pid)
	by.run()
	began := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := map[string]int{}
	var sent int
	var failures []string
	for i := range bombConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes, err := sendBombs(n.addr(), topic, bs, rounds, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err.Error())
			}
			for j, code := range codes {
				b := bs[(j+i)%len(bs)]
				sent++
				if code == 0 {
					failures = append(failures, b.name+" accepted")
				}
				refused[fmt.Sprintf("%s: %d", b.name, code)]++
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	by.halt("decompression bombs")
	_, cpu1 := procStat(pid)
	close(stop)
	sampler.Wait()
	peak := n.peakRSS()
	by.answeredAtOnce("decompression bombs")

	t.Logf("%d bombs from %d connections in %v: refusals %v", sent, bombConns, took.Round(time.Millisecond), refused)
	t.Logf("node CPU %v in all, %v per bomb; RSS peak %d MiB (VmHWM), %d MiB sampled; bound %d MiB",
		(cpu1 - cpu0).Round(time.Millisecond), ((cpu1 - cpu0) / time.Duration(max(sent, 1))).Round(time.Microsecond), peak>>20, peakSampled>>20, (bombMemoryLimit+64<<20)>>20)
	for _, f := range failures {
		t.Error(f)
	}
	if sent != bombConns*rounds {
		t.Errorf("%d bombs answered of %d", sent, bombConns*rounds)
	}
	if !raceEnabled && peak > bombMemoryLimit+64<<20 {
		t.Errorf("peak RSS %d MiB, over --memory-limit %d MiB + 64 MiB", peak>>20, bombMemoryLimit>>20)
	}
}
