package topicconfig

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestParseLocalRetentionFollowsTotal guards the resolution of local.retention.*: -2 (the
// default) follows retention.*, a looser local limit is the total, a tighter one stays.
func TestParseLocalRetentionFollowsTotal(t *testing.T) {
	for _, c := range []struct {
		name              string
		configs           map[string]string
		remote            bool
		localMs, localByt int64
	}{
		{"defaults follow", nil, false, 604800000, -1},
		{"explicit -2 follows", map[string]string{"local.retention.ms": "-2", "local.retention.bytes": "-2", "retention.ms": "5000", "retention.bytes": "900"}, false, 5000, 900},
		{"tighter stays", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000", "local.retention.bytes": "100", "retention.ms": "5000", "retention.bytes": "900"}, true, 1000, 100},
		{"looser is capped", map[string]string{"remote.storage.enable": "TRUE", "local.retention.ms": "9000", "local.retention.bytes": "1000", "retention.ms": "5000", "retention.bytes": "900"}, true, 5000, 900},
		{"unbounded local under bounded total", map[string]string{"local.retention.ms": "-1", "local.retention.bytes": "-1", "retention.bytes": "900"}, false, 604800000, 900},
		{"bounded local under unbounded total", map[string]string{"local.retention.ms": "1000", "local.retention.bytes": "100", "retention.ms": "-1"}, false, 1000, 100},
		{"unbounded both", map[string]string{"local.retention.ms": "-1", "retention.ms": "-1"}, false, -1, -1},
	} {
		s := Parse(c.configs)
		if s.RemoteStorage != c.remote || s.LocalRetentionMs != c.localMs || s.LocalRetentionBytes != c.localByt {
			t.Errorf("%s: remote %v local ms %d bytes %d, want %v %d %d", c.name, s.RemoteStorage, s.LocalRetentionMs, s.LocalRetentionBytes, c.remote, c.localMs, c.localByt)
		}
	}
}

// TestCheckCombinationRefusesWhatKafkaRefuses pins the cross-field answers of Kafka's
// LogConfig.validateTopicLogConfigValues, texts included.
func TestCheckCombinationRefusesWhatKafkaRefuses(t *testing.T) {
	on := func(kv ...string) map[string]string {
		m := map[string]string{"remote.storage.enable": "true"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name      string
		configs   map[string]string
		available bool
		want      string // "" for accepted
	}{
		{"no remote storage, anything goes", map[string]string{"cleanup.policy": "compact", "local.retention.ms": "99999999999"}, false, ""},
		{"remote storage off explicitly", map[string]string{"remote.storage.enable": "false", "cleanup.policy": "compact"}, false, ""},
		{"broker without remote storage", on(), false, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."},
		{"plain tiered topic", on(), true, ""},
		{"compacted", on("cleanup.policy", "compact"), true, "Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list."},
		{"compact and delete", on("cleanup.policy", "delete,compact"), true, "Remote log storage only supports topics with cleanup.policy=delete"},
		{"empty policy", on("cleanup.policy", ""), true, ""},
		{"delete policy", on("cleanup.policy", "delete"), true, ""},
		{"local ms above total", on("retention.ms", "1000", "local.retention.ms", "1001"), true, "Invalid value 1001 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"},
		{"local ms above the default total", on("local.retention.ms", "604800001"), true, "Value must not be more than retention.ms property value: 604800000"},
		{"local ms equal to total", on("retention.ms", "1000", "local.retention.ms", "1000"), true, ""},
		{"local ms unbounded under bounded total", on("retention.ms", "1000", "local.retention.ms", "-1"), true, "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 1000."},
		{"local ms anything under unbounded total", on("retention.ms", "-1", "local.retention.ms", "99999999999"), true, ""},
		{"local bytes above total", on("retention.bytes", "100", "local.retention.bytes", "101"), true, "Invalid value 101 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 100"},
		{"local bytes unbounded under bounded total", on("retention.bytes", "100", "local.retention.bytes", "-1"), true, "Value must not be -1 as retention.bytes value is set as 100."},
		{"local bytes under unbounded total (the default)", on("local.retention.bytes", "1000000"), true, ""},
		{"local bytes following", on("retention.bytes", "100", "local.retention.bytes", "-2"), true, ""},
	} {
		err := CheckCombination(c.configs, c.available)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted, want %q", c.name, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q, want %q", c.name, err, c.want)
		}
	}
}

// FuzzLocalRetention reads local.retention.* and retention.* values as a client may send
// them. Invariants: Parse never panics and never leaves -2 (or any value below -1) in a local
// limit; under a bounded total the local limit is bounded and within it; and a combination
// CheckCombination accepts with remote storage on keeps the local value the client set (or
// the total, for -2): Parse caps only what is refused.
func FuzzLocalRetention(f *testing.F) {
	f.Add("1000", "-2", "-1", "100")
	f.Add("-1", "5000", "100", "-1")
	f.Add("1000", "1001", "9223372036854775807", "-2")
	f.Add(" 7 ", "x", "", "-3")
	f.Fuzz(func(t *testing.T, retMs, localMs, retBytes, localBytes string) {
		configs := map[string]string{"remote.storage.enable": "true", "retention.ms": retMs, "local.retention.ms": localMs,
			"retention.bytes": retBytes, "local.retention.bytes": localBytes}
		s := Parse(configs)
		for _, c := range []struct {
			name         string
			total, local int64
			set          string
		}{{"ms", s.RetentionMs, s.LocalRetentionMs, localMs}, {"bytes", s.RetentionBytes, s.LocalRetentionBytes, localBytes}} {
			if c.local < -1 {
				t.Fatalf("%s: local limit %d", c.name, c.local)
			}
			if c.total >= 0 && (c.local < 0 || c.local > c.total) {
				t.Fatalf("%s: local limit %d outside the total %d", c.name, c.local, c.total)
			}
		}
		if ValidateAll(configs) != nil || CheckCombination(configs, true) != nil {
			return
		}
		for _, c := range []struct {
			name              string
			total, local, set int64
		}{{"ms", s.RetentionMs, s.LocalRetentionMs, mustLong(t, localMs)}, {"bytes", s.RetentionBytes, s.LocalRetentionBytes, mustLong(t, localBytes)}} {
			want := c.set
			if want == -2 || want == math.MaxInt64 && c.total < 0 {
				want = max(c.total, -1) // a total below -1 (retention.bytes takes any long) is no limit
			}
			if c.local != want {
				t.Fatalf("%s: accepted local limit %d resolved to %d (total %d)", c.name, c.set, c.local, c.total)
			}
		}
	})
}

func mustLong(t *testing.T, v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		t.Fatalf("validated value %q: %v", v, err)
	}
	return n
}
