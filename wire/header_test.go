package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFlexibleVersionMatchesKmsg derives the flexible-version table from
// kmsg so that the static table cannot drift when kmsg gains keys or
// versions.
func TestFlexibleVersionMatchesKmsg(t *testing.T) {
	known := 0
	for k := int16(-2); k < 400; k++ {
		want := int16(-1)
		if req := kmsg.RequestForKey(k); req != nil {
			known++
			for v := int16(0); v <= req.MaxVersion(); v++ {
				req.SetVersion(v)
				if req.IsFlexible() {
					want = v
					break
				}
			}
		}
		if got := FlexibleVersion(k); got != want {
			t.Errorf("FlexibleVersion(%d) = %d, kmsg says %d", k, got, want)
		}
	}
	if known != len(flexibleVersions) {
		t.Errorf("kmsg knows %d keys, the table has %d", known, len(flexibleVersions))
	}
	if FlexibleVersion(-32768) != -1 || FlexibleVersion(32767) != -1 {
		t.Error("extreme keys must be unknown")
	}
}

// TestParseRequestHeaderKmsgFrames parses headers exactly as kmsg's
// RequestFormatter writes them, flexible and not, with a client id, a null
// one and an empty one, and checks that BodyOffset lands on the body kmsg
// appended.
func TestParseRequestHeaderKmsgFrames(t *testing.T) {
	reqs := []kmsg.Request{}
	add := func(r kmsg.Request, v int16) {
		r.SetVersion(v)
		reqs = append(reqs, r)
	}
	for v := int16(3); v <= 12; v++ {
		add(testProduceRequest(t, v), v)
	}
	for v := int16(0); v <= 4; v++ {
		add(kmsg.NewPtrApiVersionsRequest(), v) // v3+ flexible, header v2
	}
	add(kmsg.NewPtrMetadataRequest(), 8)
	add(kmsg.NewPtrMetadataRequest(), 9)
	add(kmsg.NewPtrFetchRequest(), 11)
	add(kmsg.NewPtrFetchRequest(), 12)
	add(kmsg.NewPtrSASLHandshakeRequest(), 1) // never flexible
	add(kmsg.NewPtrOffsetDeleteRequest(), 0)  // never flexible
	add(kmsg.NewPtrControlledShutdownRequest(), 1)
	add(kmsg.NewPtrDescribeTopicPartitionsRequest(), 0) // flexible from v0

	for _, clientID := range []*string{kmsg.StringPtr("inlet-test"), nil, kmsg.StringPtr("")} {
		var opts []kmsg.RequestFormatterOpt
		if clientID != nil {
			opts = append(opts, kmsg.FormatterClientID(*clientID))
		}
		f := kmsg.NewRequestFormatter(opts...)
		for i, r := range reqs {
			corr := int32(1000 + i)
			frame := f.AppendRequest(nil, r, corr)[4:]
			h, err := ParseRequestHeader(frame)
			if err != nil {
				t.Fatalf("key %d v%d: %v", r.Key(), r.GetVersion(), err)
			}
			if h.APIKey != r.Key() || h.APIVersion != r.GetVersion() || h.CorrelationID != corr {
				t.Errorf("key %d v%d: got %+v", r.Key(), r.GetVersion(), h)
			}
			switch {
			case clientID == nil && h.ClientID != nil:
				t.Errorf("key %d v%d: null client id parsed as %q", r.Key(), r.GetVersion(), h.ClientID)
			case clientID != nil && (h.ClientID == nil || string(h.ClientID) != *clientID):
				t.Errorf("key %d v%d: client id %q, want %q", r.Key(), r.GetVersion(), h.ClientID, *clientID)
			}
			if body := r.AppendTo(nil); !bytes.Equal(frame[h.BodyOffset:], body) {
				t.Errorf("key %d v%d: body at %d does not match kmsg's", r.Key(), r.GetVersion(), h.BodyOffset)
			}
		}
	}
}

// TestParseRequestHeaderControlledShutdownV0 guards the one header v0
// request: no client id at all.
func TestParseRequestHeaderControlledShutdownV0(t *testing.T) {
	r := kmsg.NewPtrControlledShutdownRequest()
	r.Version = 0
	r.BrokerID = 7
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("x")).AppendRequest(nil, r, 5)[4:]
	h, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.BodyOffset != 8 || h.ClientID != nil || h.CorrelationID != 5 {
		t.Fatalf("got %+v", h)
	}
}

// hdr hand-builds a request header.
func hdr(key, version int16, corr int32, clientID []byte, tags []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = append(b, 0xff, 0xff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
		b = append(b, clientID...)
	}
	return append(b, tags...)
}

// TestParseRequestHeaderSkipsTaggedFields guards header v2's tag section:
// fields are skipped, whatever their tags and sizes.
func TestParseRequestHeaderSkipsTaggedFields(t *testing.T) {
	tags := []byte{2, 0, 3, 'a', 'b', 'c', 0x80, 0x01, 0} // tag 0 "abc", tag 128 empty
	frame := append(hdr(0, 9, 42, []byte("cli"), tags), 0xAA, 0xBB)
	h, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.BodyOffset != len(frame)-2 || string(h.ClientID) != "cli" {
		t.Fatalf("got %+v", h)
	}
	// The same bytes under a non-flexible version are body, not tags.
	frame = append(hdr(0, 8, 42, []byte("cli"), nil), tags...)
	if h, err = ParseRequestHeader(frame); err != nil || h.BodyOffset != len(frame)-len(tags) {
		t.Fatalf("v8: %+v %v", h, err)
	}
}

// TestParseRequestHeaderUnknownKey guards that an unknown key parses as
// header v1 (no tag section), so the server can answer it.
func TestParseRequestHeaderUnknownKey(t *testing.T) {
	frame := append(hdr(1000, 7, -3, []byte("c"), nil), 1, 2, 3)
	h, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.APIKey != 1000 || h.APIVersion != 7 || h.CorrelationID != -3 || h.BodyOffset != len(frame)-3 {
		t.Fatalf("got %+v", h)
	}
}

func TestParseRequestHeaderEmptyClientIDIsNotNull(t *testing.T) {
	h, err := ParseRequestHeader(hdr(3, 1, 1, []byte{}, nil))
	if err != nil || h.ClientID == nil || len(h.ClientID) != 0 {
		t.Fatalf("%+v %v", h, err)
	}
}

// TestParseRequestHeaderClientIDCapped guards that an append to ClientID
// cannot overwrite the body after it.
func TestParseRequestHeaderClientIDCapped(t *testing.T) {
	frame := append(hdr(3, 1, 1, []byte("ab"), nil), 'Z')
	h, _ := ParseRequestHeader(frame)
	_ = append(h.ClientID, 'X')
	if frame[len(frame)-1] != 'Z' {
		t.Fatal("append to ClientID overwrote the body")
	}
}

func TestParseRequestHeaderMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"ShortFrame", []byte{0, 0, 0, 9, 0, 0, 0}},
		{"MissingClientIDLength", hdr(0, 3, 1, nil, nil)[:9]},
		{"ClientIDPastEnd", hdr(0, 3, 1, []byte("abcdef"), nil)[:12]},
		{"NegativeClientIDLength", append(hdr(0, 3, 1, nil, nil)[:8], 0xff, 0xfe)},
		{"MissingTagSection", hdr(0, 9, 1, []byte("a"), nil)},
		{"TagPastEnd", hdr(0, 9, 1, []byte("a"), []byte{1, 0, 5, 'x'})},
		{"TagCountWithoutTags", hdr(0, 9, 1, []byte("a"), []byte{0xff, 0xff, 0xff, 0xff, 0x0f})},
		{"TagCountVarintOverflow", hdr(0, 9, 1, []byte("a"), []byte{0xff, 0xff, 0xff, 0xff, 0x7f})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if h, err := ParseRequestHeader(tc.frame); err == nil {
				t.Fatalf("parsed garbage as %+v", h)
			}
		})
	}
}

func TestAppendResponseHeader(t *testing.T) {
	dst := []byte("junk")
	frame := AppendResponseHeader(dst, 0x01020304, false)
	frame = append(frame, "body"...)
	PatchFrameLength(frame[4:])
	want := []byte("junk\x00\x00\x00\x08\x01\x02\x03\x04body")
	if !bytes.Equal(frame, want) {
		t.Fatalf("v0: %q, want %q", frame, want)
	}

	frame = AppendResponseHeader(nil, -1, true)
	frame = append(frame, 'b')
	PatchFrameLength(frame)
	want = []byte{0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0, 'b'}
	if !bytes.Equal(frame, want) {
		t.Fatalf("v1: %v, want %v", frame, want)
	}
}

func TestParseRequestHeaderZeroAllocs(t *testing.T) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, testProduceRequest(t, 11), 1)[4:]
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ParseRequestHeader(frame); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ParseRequestHeader allocates %v times", n)
	}
}
