package server

import "testing"

// TestConsumerGroupSettingsRefusesWhatKafkaRefuses: the KIP-848 flags take Kafka's values and
// refuse a protocol list without classic, an unknown protocol or assignor, and a heartbeat
// interval not below the session timeout.
func TestConsumerGroupSettingsRefusesWhatKafkaRefuses(t *testing.T) {
	ps, cc, err := ConsumerGroupSettings("classic,consumer", "range, uniform", 45000, 5000, 10)
	if err != nil || len(ps) != 2 || cc.Assignors[0] != "range" || cc.MaxSize != 10 || cc.HeartbeatInterval.Milliseconds() != 5000 {
		t.Fatalf("defaults: %v %+v %v", ps, cc, err)
	}
	for _, bad := range []struct {
		protocols, assignors string
		session, heartbeat   int
	}{
		{"consumer", "uniform", 45000, 5000},
		{"classic,share", "uniform", 45000, 5000},
		{"classic", "sticky", 45000, 5000},
		{"classic", "", 45000, 5000},
		{"classic", "uniform", 5000, 5000},
		{"classic", "uniform", 45000, 0},
	} {
		if _, _, err := ConsumerGroupSettings(bad.protocols, bad.assignors, bad.session, bad.heartbeat, 1); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
