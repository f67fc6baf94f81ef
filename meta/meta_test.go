package meta

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/wire"
)

func openTemp(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

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

// TestCommittedOffsetsSurviveRestart guards the offset store.
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	k := OffsetKey{Topic: "t", Partition: 3}
	if err := l.CommitOffsets("g", map[OffsetKey]CommittedOffset{k: {Offset: 42, LeaderEpoch: 0, Metadata: "m", CommitTime: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := l.CommitOffsets("g2", map[OffsetKey]CommittedOffset{k: {Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveGroup("g", GroupRecord{ProtocolType: "consumer", Generation: 5}); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteGroup("g2"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	gs, err := l.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	g := gs["g"]
	if g == nil || g.Offsets[k].Offset != 42 || g.Offsets[k].Metadata != "m" || g.Record.Generation != 5 {
		t.Fatalf("loaded %+v", g)
	}
	if _, ok := gs["g2"]; ok {
		t.Fatal("deleted group came back")
	}
}

func TestClusterIDIsStableAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	id := l.ClusterID()
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	if l.ClusterID() != id {
		t.Fatalf("cluster id changed: %q -> %q", id, l.ClusterID())
	}
}

// TestWriteStallTimeIncludesTheStallUnderWay: a stall still going on counts towards the
// total, and an end without a begin (cannot happen in Pebble) adds nothing.
func TestWriteStallTimeIncludesTheStallUnderWay(t *testing.T) {
	var w writeStalls
	el := w.listener()
	el.WriteStallEnd()
	if n, d := w.read(); n != 0 || d != 0 {
		t.Fatalf("after a lone end: %d stalls, %v", n, d)
	}
	el.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "test"})
	time.Sleep(5 * time.Millisecond)
	if n, d := w.read(); n != 1 || d < 5*time.Millisecond {
		t.Fatalf("during a stall: %d stalls, %v", n, d)
	}
	el.WriteStallEnd()
	n, d := w.read()
	time.Sleep(2 * time.Millisecond)
	if n2, d2 := w.read(); n != 1 || n2 != 1 || d2 != d {
		t.Fatalf("after the stall: %d stalls, %v, then %v", n, d, d2)
	}
}

// TestBadCatalogKeysAreSkippedAtLoad: a stored catalog key that does not decode (a committed
// offset's key or value, a group record, a dynamic broker config) is named in an error logged
// as it loads and skipped; everything else loads.
func TestBadCatalogKeysAreSkippedAtLoad(t *testing.T) {
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
	for _, kv := range [][2][]byte{
		{wrapped, appendCommittedOffset(nil, CommittedOffset{Offset: 1})},
		{short, []byte{1, 2, 3}},
		{badGroup, []byte("{not json")},
		{brokerConfigKeys[BrokerNode], []byte("[1,2")},
	} {
		if err := l.db.Set(kv[0], kv[1], pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()

	var logs lockedBuffer
	opts := Options{Dir: dir, MemTableSize: 8 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("open with bad metadata keys: %v", err)
	}
	defer l.Close()
	if _, err := l.BrokerConfigs(); err != nil {
		t.Fatalf("load broker configs: %v", err)
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
	for _, k := range [][]byte{wrapped, short, badGroup, brokerConfigKeys[BrokerNode]} {
		if !strings.Contains(out, QuoteKey(k)) {
			t.Errorf("key %s not named in the log:\n%s", QuoteKey(k), out)
		}
	}
	if n := strings.Count(out, "level=ERROR"); n != 4 {
		t.Errorf("%d errors logged, want 4:\n%s", n, out)
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
