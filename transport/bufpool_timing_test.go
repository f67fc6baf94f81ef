package transport

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"
)

// The node's buffer pools against github.com/valyala/bytebufferpool, side by side, on the
// sizes the node pools: reply frames (GetOut and putOut: the Out keeps its buffer, up to
// MaxPooledReply) and request frames (getBuf and putBuf: power-of-two classes from 1 KiB to
// 16 MiB). bytebufferpool keeps one pool of buffers of any size and calibrates, every 42,000
// Puts, the size a new buffer starts at (the most common size class) and the largest it keeps
// (the 95th percentile); a buffer larger than that is dropped on Put.
//
// Each benchmark runs a fixed mix of sizes (below), on every P at once (RunParallel), as the
// node's connection workers do: one op is a get, the frame's bytes copied in (a reply appended,
// as its encoder appends; a request copied once, as the transport copies a frame) and a put.
// B/op and allocs/op are the pools' own cost; capB/op is the mean capacity of the buffer an op
// used, the memory a buffer in flight holds. Adopting bytebufferpool for replies would keep the
// Out pooled and take only its bytes from bytebufferpool: the bytebufferpool arm here leaves
// out that second pool operation, which favours it.
//
//	go test -run '^$' -bench 'BenchmarkBufferPools' -count 5 ./transport/

// sized is one frame of a mix: n bytes, and for a reply the size hint its encoder passes to
// GetOut (encodeResponse 4096, Produce 64+32 per partition, Fetch 4096 or its final size when
// that is over MaxPooledReply).
type sized struct{ n, hint int }

// encodedLen is the length of resp encoded at version v.
func encodedLen(resp kmsg.Response, v int16) int {
	resp.SetVersion(v)
	return len(resp.AppendTo(nil))
}

// produceReplyLen: a Produce v9 response for one partition (the node's own encoder writes the
// same bytes), plus the 8-byte reply header.
func produceReplyLen() int {
	r := kmsg.NewPtrProduceResponse()
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "bench-topic"
	p := kmsg.NewProduceResponseTopicPartition()
	p.BaseOffset, p.LogAppendTime, p.LogStartOffset = 123456789, -1, 0
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return 8 + encodedLen(r, 9)
}

// metadataReplyLen: a Metadata v12 response naming topics topics of 16 partitions each, one
// broker, plus the reply header: what a client's refresh of one topic, or of all, is answered.
func metadataReplyLen(topics int) int {
	r := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "127.0.0.1", 9092
	r.Brokers = append(r.Brokers, b)
	cluster := "inlet"
	r.ClusterID = &cluster
	for ti := range topics {
		t := kmsg.NewMetadataResponseTopic()
		name := "bench-topic-" + string(rune('a'+ti%26)) + string(rune('a'+ti/26%26))
		t.Topic = &name
		for p := range 16 {
			pt := kmsg.NewMetadataResponseTopicPartition()
			pt.Partition, pt.Leader = int32(p), 1
			pt.Replicas, pt.ISR = []int32{1}, []int32{1}
			t.Partitions = append(t.Partitions, pt)
		}
		r.Topics = append(r.Topics, t)
	}
	return 9 + encodedLen(r, 12)
}

// mix draws 4096 frames from weighted kinds, reproducibly.
func mix(kinds []sized, weights []int) []sized {
	total := 0
	for _, w := range weights {
		total += w
	}
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]sized, 4096)
	for i := range out {
		x := rng.IntN(total)
		k := 0
		for x >= weights[k] {
			x -= weights[k]
			k++
		}
		out[i] = kinds[k]
	}
	return out
}

type poolMix struct {
	name  string
	reply bool // a reply frame (GetOut), else a request frame (getBuf)
	seq   []sized
}

func poolMixes() []poolMix {
	produce := produceReplyLen()
	meta1, meta10, meta100 := metadataReplyLen(1), metadataReplyLen(10), metadataReplyLen(100)
	const fetchHdr = 100 // a Fetch response's fields around one partition's batches
	return []poolMix{
		// A producing client's replies: Produce acknowledgements, a Metadata refresh now and
		// then.
		{"replies=produce", true, mix([]sized{{produce, 96}, {meta1, 4096}}, []int{95, 5})},
		// Metadata replies of one topic, ten and a hundred (of 16 partitions each).
		{"replies=metadata", true, mix([]sized{{meta1, 4096}, {meta10, 4096}, {meta100, 4096}}, []int{60, 30, 10})},
		// A consumer's Fetch replies: tailing (a batch of 1 or 16 KiB) and catching up (1 MiB a
		// partition, kgo's FetchMaxPartitionBytes, over 1 or 4 partitions).
		{"replies=fetch", true, mix([]sized{
			{fetchHdr + 1<<10, 4096}, {fetchHdr + 16<<10, 4096}, {fetchHdr + 1<<20, 4096}, {fetchHdr + 4<<20, 4096},
		}, []int{50, 30, 15, 5})},
		// Request frames: Fetch requests (about 130 bytes for one partition), Heartbeats and
		// Metadata requests (about 60), Produce requests with a linger's batch of 100-byte
		// records (16 and 64 KiB) and a full batch at kgo's 1,000,012-byte limit.
		{"frames=produce+fetch", false, mix([]sized{{130, 0}, {60, 0}, {16 << 10, 0}, {64 << 10, 0}, {1000012 + 100, 0}}, []int{40, 10, 30, 15, 5})},
	}
}

func BenchmarkBufferPools(b *testing.B) {
	src := make([]byte, 8<<20)
	for _, m := range poolMixes() {
		var mean int
		for _, s := range m.seq {
			mean += s.n
		}
		mean /= len(m.seq)
		b.Run(m.name+"/pool=inlet", func(b *testing.B) {
			runPoolMix(b, m, mean, func(s sized) int {
				if m.reply {
					ob := GetOut(s.hint)
					ob.B = append(ob.B, src[:s.n]...)
					c := cap(ob.B)
					putOut(ob)
					return c
				}
				buf := getBuf(s.n)
				copy(*buf, src[:s.n])
				c := cap(*buf)
				putBuf(buf)
				return c
			})
		})
		var bbp bytebufferpool.Pool // one per mix, calibrated by its sizes alone
		b.Run(m.name+"/pool=bytebufferpool", func(b *testing.B) {
			runPoolMix(b, m, mean, func(s sized) int {
				bb := bbp.Get()
				bb.B = append(bb.B, src[:s.n]...)
				c := cap(bb.B)
				bbp.Put(bb)
				return c
			})
		})
	}
}

// runPoolMix runs op over m's sizes on every P and reports the mean capacity used.
func runPoolMix(b *testing.B, m poolMix, mean int, op func(sized) int) {
	runtime.GC() // two collections empty the sync.Pools of what an earlier mix left
	runtime.GC()
	b.SetBytes(int64(mean))
	b.ReportAllocs()
	var capSum atomic.Int64
	var start atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(start.Add(997)) // each goroutine starts elsewhere in the mix
		var caps int64
		for pb.Next() {
			caps += int64(op(m.seq[i%len(m.seq)]))
			i++
		}
		capSum.Add(caps)
	})
	b.ReportMetric(float64(capSum.Load())/float64(b.N), "capB/op")
}
