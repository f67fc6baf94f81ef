package topicconfig

import "testing"

// TestConfigValuesMustBeUTF8: a topic or dynamic broker config value is stored in a JSON
// record, which would not give back bytes that are not UTF-8, so such a value is refused (the
// free-form ones, *.replication.throttled.replicas, accepted anything before).
func TestConfigValuesMustBeUTF8(t *testing.T) {
	for _, d := range Defs() {
		if err := Validate(d.Name, "\xff"); err == nil {
			t.Errorf("topic config %s accepts a value that is not UTF-8", d.Name)
		}
	}
	for _, d := range BrokerDefs() {
		if d.Dynamic {
			if err := ValidateBroker(d.Name, "\xff"); err == nil {
				t.Errorf("broker config %s accepts a value that is not UTF-8", d.Name)
			}
		}
	}
	if err := Validate("leader.replication.throttled.replicas", "0:1,1:1"); err != nil {
		t.Fatalf("a valid value refused: %v", err)
	}
}
