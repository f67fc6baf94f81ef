package topicconfig

import (
	"strings"
	"testing"
)

// TestCheckDisklessRefusesWhatCannotBeDiskless guards diskless.enable's rules: a bucket is
// needed, compaction and tiering are refused with it, and false is always accepted.
func TestCheckDisklessRefusesWhatCannotBeDiskless(t *testing.T) {
	for _, c := range []struct {
		name    string
		configs map[string]string
		bucket  bool
		want    string // "" for accepted
	}{
		{"plain diskless", map[string]string{"diskless.enable": "true"}, true, ""},
		{"upper case", map[string]string{"diskless.enable": "TRUE"}, false, "need a bucket"},
		{"no bucket", map[string]string{"diskless.enable": "true"}, false, "need a bucket"},
		{"off without a bucket", map[string]string{"diskless.enable": "false", "cleanup.policy": "compact"}, false, ""},
		{"compacted", map[string]string{"diskless.enable": "true", "cleanup.policy": "compact"}, true, "compact"},
		{"compact and delete", map[string]string{"diskless.enable": "true", "cleanup.policy": "delete, compact"}, true, "compact"},
		{"delete policy", map[string]string{"diskless.enable": "true", "cleanup.policy": "delete"}, true, ""},
		{"tiered too", map[string]string{"diskless.enable": "true", "remote.storage.enable": "true"}, true, "both diskless.enable and remote.storage.enable"},
	} {
		err := CheckCombination(c.configs, c.bucket)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if err := Validate("diskless.enable", "maybe"); err == nil {
		t.Error("diskless.enable=maybe accepted")
	}
	if !Parse(map[string]string{"diskless.enable": "true"}).Diskless || Parse(nil).Diskless {
		t.Error("Parse does not read diskless.enable")
	}
}

// TestDisklessCannotChangeOnAnExistingTopic: turning it on or off later is refused, setting
// it again to the value it has is not.
func TestDisklessCannotChangeOnAnExistingTopic(t *testing.T) {
	on := map[string]string{"diskless.enable": "true"}
	if CheckDisklessChange(nil, on) == nil || CheckDisklessChange(on, map[string]string{}) == nil {
		t.Fatal("a change of diskless.enable accepted")
	}
	if err := CheckDisklessChange(on, map[string]string{"diskless.enable": "True", "retention.ms": "1"}); err != nil {
		t.Fatalf("same value refused: %v", err)
	}
	if err := CheckDisklessChange(nil, map[string]string{"diskless.enable": "false"}); err != nil {
		t.Fatalf("explicit false on a local topic refused: %v", err)
	}
}

// TestWithDisklessDefault: the broker default is written into a new topic's overrides, never
// over an explicit value, and never into a topic that cannot be diskless.
func TestWithDisklessDefault(t *testing.T) {
	if got := WithDisklessDefault(nil, true); got["diskless.enable"] != "true" {
		t.Fatalf("default not applied: %v", got)
	}
	in := map[string]string{"retention.ms": "5"}
	if got := WithDisklessDefault(in, true); got["diskless.enable"] != "true" || in["diskless.enable"] != "" {
		t.Fatalf("default applied to %v, input now %v", got, in)
	}
	for _, c := range []map[string]string{
		{"diskless.enable": "false"}, {"cleanup.policy": "compact"}, {"remote.storage.enable": "true"},
	} {
		if got := WithDisklessDefault(c, true); got["diskless.enable"] == "true" {
			t.Errorf("default applied over %v", c)
		}
	}
	if got := WithDisklessDefault(nil, false); got != nil {
		t.Fatalf("default off gave %v", got)
	}
	if d, ok := LookupBroker("log.diskless.enable"); !ok || d.Dynamic || d.Default != "false" {
		t.Fatalf("log.diskless.enable: %+v", d)
	}
}
