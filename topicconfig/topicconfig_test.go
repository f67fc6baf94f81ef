package topicconfig

import "testing"

// TestValidateRejectsWhatKafkaRejects pins the validation answers CreateTopics and
// AlterConfigs turn into INVALID_CONFIG.
func TestValidateRejectsWhatKafkaRejects(t *testing.T) {
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{"retention.ms", "1000", true},
		{"retention.ms", "-1", true},
		{"retention.ms", "soon", false},
		{"retention.ms", "-2", false},
		{"cleanup.policy", "compact,delete", true},
		{"cleanup.policy", "shred", false},
		{"message.timestamp.type", "LogAppendTime", true},
		{"message.timestamp.type", "Now", false},
		{"max.message.bytes", "2147483648", false}, // not an INT
		{"min.insync.replicas", "0", false},
		{"segment.bytes", "13", false}, // below Kafka 3.x's 14 (a v0 record's overhead)
		{"segment.bytes", "14", true},  // Kafka 3.9 allows it; 4.x wants 1 MiB
		{"message.format.version", "2.8", true},
		{"message.format.version", "3.0-IV1", true},
		{"message.format.version", "latest", false},
		// Kafka 3.9's MetadataVersion.fromVersionString: legacy versions, read up to their
		// release (three parts for 0.x, two after), with or without a sub-version.
		{"message.format.version", "0.10.0.0", true},
		{"message.format.version", "0.8.0", true},
		{"message.format.version", "0.10.2-IV0", true},
		{"message.format.version", "2.8-IV1", true},
		{"message.format.version", "3.0", true},
		{"message.format.version", "3.0.1", true},
		{"message.format.version", "1.0.0", true},
		{"message.format.version", "0.10", false},
		{"message.format.version", "2.8-IV2", false},
		{"message.format.version", "3.10", false},
		{"message.format.version", "9.9", false},
		{"message.format.version", "", false},
		{"message.downconversion.enable", "false", true},
		{"message.timestamp.difference.max.ms", "1000", true},
		{"compression.zstd.level", "-5", true},
		{"compression.gzip.level", "10", false},
		{"min.cleanable.dirty.ratio", "1.5", false},
		{"preallocate", "yes", false},
		{"no.such.config", "1", false},
	} {
		if err := Validate(c.name, c.value); (err == nil) != c.ok {
			t.Errorf("Validate(%s=%s) = %v, want ok=%v", c.name, c.value, err, c.ok)
		}
	}
}

// TestParseSettings pins what the log acts on.
func TestParseSettings(t *testing.T) {
	s := Parse(nil)
	if s.RetentionMs != 604800000 || s.RetentionBytes != -1 || !s.Delete || s.Compact || s.MaxMessageBytes != 0 || s.LogAppendTime {
		t.Fatalf("defaults: %+v", s)
	}
	s = Parse(map[string]string{"cleanup.policy": "compact", "max.message.bytes": "0", "message.timestamp.type": "LogAppendTime", "retention.bytes": "10"})
	if s.Delete || !s.Compact || s.MaxMessageBytes != -1 || !s.LogAppendTime || s.RetentionBytes != 10 {
		t.Fatalf("overrides: %+v", s)
	}
}

// TestEveryDefinitionHasASynonymAndValidDefault guards the table itself.
func TestEveryDefinitionHasASynonymAndValidDefault(t *testing.T) {
	for _, d := range Defs() {
		if len(d.Synonyms) == 0 {
			t.Errorf("%s has no broker synonym", d.Name)
		}
		if err := d.Validate(d.Default); err != nil {
			t.Errorf("%s default %q is invalid: %v", d.Name, d.Default, err)
		}
	}
}
