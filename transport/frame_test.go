package transport

import (
	"bytes"
	"math/rand"
	"testing"
)

// framesOf splits stream into the bodies of its frames, as the framer should.
func framesOf(stream []byte) [][]byte {
	var out [][]byte
	for len(stream) >= 4 {
		n := int(uint32(stream[0])<<24 | uint32(stream[1])<<16 | uint32(stream[2])<<8 | uint32(stream[3]))
		out = append(out, stream[4:4+n])
		stream = stream[4+n:]
	}
	return out
}

// feedChunks frames stream delivered in chunks that end at cuts (increasing offsets), the way a
// stream reader does (chunkFramer), on a fresh connection; it returns the frames the handler
// was handed and checks that every byte of budget came back.
func feedChunks(tb testing.TB, stream []byte, cuts []int) [][]byte {
	tb.Helper()
	tr := New(Config{Budget: 1 << 30, MaxFrame: 1 << 30})
	h := &recorder{}
	c := served(tr, h, &writes{})
	f := chunkFramer{c: c, buf: make([]byte, streamReadBuf)}
	from := 0
	for _, to := range append(cuts, len(stream)) {
		for from < to { // a chunk longer than the read buffer arrives in several reads
			n := copy(f.next(), stream[from:to])
			if f.feed(n) != more {
				tb.Fatalf("framing stopped at byte %d (refused %v)", from, h.refused)
			}
			from += n
		}
	}
	if f.kept != 0 || c.partial != nil {
		tb.Fatalf("%d bytes kept, partial frame %v after the whole stream", f.kept, c.partial != nil)
	}
	checkIdle(tb, tr)
	return h.frames
}

func sameFrames(tb testing.TB, got, want [][]byte, how string) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d frames, want %d", how, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			tb.Fatalf("%s: frame %d differs (%d bytes, want %d)", how, i, len(got[i]), len(want[i]))
		}
	}
}

// TestFramesSplitAtEveryByteBoundary: a stream of several frames (the smallest, frames whose
// length prefixes straddle reads, a frame of one byte) comes out the same however it is cut:
// at every single byte boundary, at every pair of boundaries, and one byte per read.
func TestFramesSplitAtEveryByteBoundary(t *testing.T) {
	var stream []byte
	for i, n := range []int{8, 1, 300, 17, 8, 64, 2} {
		stream = appendFrame(stream, body(i, n))
	}
	want := framesOf(stream)
	sameFrames(t, feedChunks(t, stream, nil), want, "whole")
	for i := 1; i < len(stream); i++ {
		sameFrames(t, feedChunks(t, stream, []int{i}), want, "one cut")
	}
	for i := 1; i < len(stream); i++ {
		for j := i + 1; j < len(stream); j += 3 {
			sameFrames(t, feedChunks(t, stream, []int{i, j}), want, "two cuts")
		}
	}
	var every []int
	for i := 1; i < len(stream); i++ {
		every = append(every, i)
	}
	sameFrames(t, feedChunks(t, stream, every), want, "a byte per read")
}

// TestLargeFramesSplitAtRandom: frames larger than the first buffer (initialFrameBuf), whose
// buffers grow as their bytes arrive, come out the same when the stream is cut at random
// points, and at every boundary around the buffer's growth.
func TestLargeFramesSplitAtRandom(t *testing.T) {
	var stream []byte
	for i, n := range []int{9, initialFrameBuf + 1, 3 * initialFrameBuf, 8, initialFrameBuf*frameGrowth + 5, 8} {
		stream = appendFrame(stream, body(i, n))
	}
	want := framesOf(stream)
	rng := rand.New(rand.NewSource(1))
	for range 50 {
		var cuts []int
		for at := rng.Intn(2 * initialFrameBuf); at < len(stream); at += 1 + rng.Intn(2*initialFrameBuf) {
			cuts = append(cuts, at)
		}
		sameFrames(t, feedChunks(t, stream, cuts), want, "random cuts")
	}
	second := 4 + 9 + 4 // where the second frame's body starts
	for d := -6; d <= 6; d++ {
		sameFrames(t, feedChunks(t, stream, []int{second + initialFrameBuf + d}), want, "a cut near the growth")
	}
}

// TestFrameSizeRefused: a length prefix under MinFrame or over the connection's MaxFrame
// closes the connection before anything is allocated; SetMaxFrame applies from the next prefix.
func TestFrameSizeRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int32
		ok   bool
	}{{"too small", 7, false}, {"negative", -1, false}, {"smallest", 8, true}, {"largest", 100, true}, {"too large", 101, false}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20, MinFrame: 8})
			h := &recorder{}
			c := served(tr, h, &writes{})
			c.SetMaxFrame(100)
			stream := appendFrame(nil, make([]byte, max(tc.size, 0)))
			stream[0], stream[1], stream[2], stream[3] = byte(tc.size>>24), byte(tc.size>>16), byte(tc.size>>8), byte(tc.size)
			a := c.feed(&sliceSource{b: stream})
			if ok := a == more && len(h.frames) == 1; ok != tc.ok {
				t.Fatalf("action %v, %d frames, refused %v", a, len(h.frames), h.refused)
			}
			if !tc.ok && (len(h.refused) != 1 || h.refused[0] != FrameSize || c.partial != nil) {
				t.Fatalf("refused %v, partial %v", h.refused, c.partial != nil)
			}
			c.markClosed()
			checkIdle(t, tr)
		})
	}
}
