package batchlog

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"inlet/wire"
)

// FuzzOffsetKey: the committed-offset key codec round-trips every group id and topic name it
// accepts (anything up to 65535 bytes, twice the protocol's string limit), and parseOffsetKey
// never panics on arbitrary bytes; a key it accepts re-encodes to the same bytes.
func FuzzOffsetKey(f *testing.F) {
	f.Add("group", "topic", int32(3), []byte("o\x00\x01g\x00\x01t\x00\x00\x00\x01"))
	f.Add("", "", int32(-1), []byte("o"))
	f.Add(strings.Repeat("g", 300), "t", int32(0), []byte("o\x11\x70gggg"))
	f.Fuzz(func(t *testing.T, group, topic string, partition int32, raw []byte) {
		if len(group) <= maxKeyName && len(topic) <= maxKeyName {
			k := offsetKey(group, topic, partition)
			g, key, err := parseOffsetKey(k)
			if err != nil || g != group || key.Topic != topic || key.Partition != partition {
				t.Fatalf("offset key of (%q, %q, %d) read back as (%q, %+v, %v)", group, topic, partition, g, key, err)
			}
			if !bytes.HasPrefix(k, groupPrefix(group)) {
				t.Fatal("an offset key outside its group's prefix")
			}
		}
		if g, key, err := parseOffsetKey(raw); err == nil {
			if again := offsetKey(g, key.Topic, key.Partition); !bytes.Equal(again, raw) {
				t.Fatalf("%x parsed, re-encoded as %x", raw, again)
			}
		}
	})
}

// FuzzCommittedOffset: the committed-offset value round-trips every offset, leader epoch,
// commit time and metadata (any bytes), and parsing arbitrary bytes never panics.
func FuzzCommittedOffset(f *testing.F) {
	f.Add(int64(5), int32(-1), int64(1_700_000_000_000), "meta", []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, offset int64, epoch int32, at int64, md string, raw []byte) {
		o := CommittedOffset{Offset: offset, LeaderEpoch: epoch, CommitTime: at, Metadata: md}
		got, err := parseCommittedOffset(appendCommittedOffset(nil, o))
		if err != nil || got != o {
			t.Fatalf("%+v read back as %+v, %v", o, got, err)
		}
		_, _ = parseCommittedOffset(raw)
	})
}

// TestOffsetKeysAtTheLimitsRoundTrip: every name the protocol can carry fits the offset key
// (wire.MaxStringLength, and Kafka's 249-byte topic names), through Pebble and a restart.
func TestOffsetKeysAtTheLimitsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	group := strings.Repeat("g", wire.MaxStringLength)
	topic := strings.Repeat("t", 249)
	md := strings.Repeat("m", 4096) + "\xff\x00" // metadata is stored as bytes: any bytes
	want := CommittedOffset{Offset: 7, LeaderEpoch: 2, CommitTime: 99, Metadata: md}
	if err := l.CommitOffsets(group, map[OffsetKey]CommittedOffset{{topic, 2147483647}: want}); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveGroup(group, GroupRecord{ProtocolType: "consumer", Generation: 3, StateMs: 42}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	gs, err := l.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	g := gs[group]
	if g == nil || g.Offsets[OffsetKey{topic, 2147483647}] != want || g.Record.Generation != 3 || g.Record.StateMs != 42 {
		t.Fatalf("after a restart: %+v", g)
	}
}

// TestOffsetKeyRefusesWhatItCannotHold: a group id past the key's u16 length (the 70,000-byte
// id that once left a data directory unbootable) is refused by the codec, not written wrapped.
func TestOffsetKeyRefusesWhatItCannotHold(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	long := strings.Repeat("g", 70000)
	if err := l.CommitOffsets(long, map[OffsetKey]CommittedOffset{{"t", 0}: {Offset: 1}}); err != ErrNameTooLong {
		t.Fatalf("commit: %v, want ErrNameTooLong", err)
	}
	if err := l.DeleteOffsets(long, []OffsetKey{{"t", 0}}); err != ErrNameTooLong {
		t.Fatalf("delete offsets: %v", err)
	}
	if err := l.DeleteGroup(long); err != ErrNameTooLong {
		t.Fatalf("delete group: %v", err)
	}
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	if gs, err := l.LoadGroups(); err != nil || len(gs) != 0 {
		t.Fatalf("after a restart: %v %v", gs, err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestBadMetadataKeysAreSkippedAtStartup: a stored key that is not record data and does not
// decode (a committed offset's key or value, a group record, a dynamic broker config, a
// compacted-to mark) is named in an error logged at start-up and skipped; the log opens and
// everything else loads. A bad key of a partition's log state still stops start-up, naming it.
func TestBadMetadataKeysAreSkippedAtStartup(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	if err := l.CommitOffsets("good", map[OffsetKey]CommittedOffset{{"t", 0}: {Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	// The key the u16 length used to write for a 70,000-byte group id.
	wrapped := []byte{kindOffset}
	n70000 := 70000
	wrapped = binary.BigEndian.AppendUint16(wrapped, uint16(n70000)) // 4464
	wrapped = append(wrapped, strings.Repeat("g", 70000)...)
	wrapped = binary.BigEndian.AppendUint16(wrapped, 1)
	wrapped = append(wrapped, 't', 0, 0, 0, 0)
	short := offsetKey("short-value", "t", 0)
	badGroup := append([]byte{kindGroup}, "badrecord"...)
	var cleaned [highKeyLen + 1]byte
	putCleanedKey(cleaned[:], 7)
	for _, kv := range [][2][]byte{
		{wrapped, appendCommittedOffset(nil, CommittedOffset{Offset: 1})},
		{short, []byte{1, 2, 3}},
		{badGroup, []byte("{not json")},
		{brokerConfigKeys[BrokerNode], []byte("[1,2")},
		{cleaned[:], []byte{1}},
	} {
		if err := l.db.Set(kv[0], kv[1], pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()

	var logs lockedBuffer
	opts := Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("open with bad metadata keys: %v", err)
	}
	gs, err := l.LoadGroups()
	if err != nil {
		t.Fatalf("load groups: %v", err)
	}
	if g := gs["good"]; g == nil || g.Offsets[OffsetKey{"t", 0}].Offset != 5 {
		t.Fatalf("the good offset: %+v", gs["good"])
	}
	if len(gs) != 1 {
		t.Errorf("groups loaded: %d, want only the good one", len(gs))
	}
	out := logs.String()
	for _, k := range [][]byte{wrapped, short, badGroup, brokerConfigKeys[BrokerNode], cleaned[:]} {
		if !strings.Contains(out, quoteKey(k)) {
			t.Errorf("key %s not named in the log:\n%s", quoteKey(k), out)
		}
	}
	if n := strings.Count(out, "level=ERROR"); n != 5 {
		t.Errorf("%d errors logged, want 5:\n%s", n, out)
	}
	// Log state is record data: a bad high watermark key still stops start-up.
	var h [highKeyLen + 1]byte
	putHighKey(h[:], 3)
	if err := l.db.Set(h[:], []byte{1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err := Open(opts); err == nil {
		l.Close()
		t.Fatal("a bad high watermark key did not stop start-up")
	} else if !strings.Contains(err.Error(), quoteKey(h[:])) {
		t.Fatalf("the error does not name the key: %v", err)
	}
}
