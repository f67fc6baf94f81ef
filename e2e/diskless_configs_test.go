package e2e

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/objstore"
	"inlet/server"
)

// TestDisklessDefaultIsDescribed: DescribeConfigs of the broker reports log.diskless.enable as
// --log-diskless-enable set it (STATIC_BROKER_CONFIG), not Kafka's default; a topic's
// diskless.enable stays what was resolved at its creation, whatever the flag says now.
func TestDisklessDefaultIsDescribed(t *testing.T) {
	for _, def := range []bool{true, false} {
		n := startDisklessNode(t, objstore.NewMemory(), t.TempDir(), "127.0.0.1:0", false, func(c *server.Config) { c.DisklessDefault = def })
		cl := tierClient(t, &broker{addr: n.addr})
		want := "false"
		if def {
			want = "true"
		}
		c, ok := describeConfigs(t, cl, kmsg.ConfigResourceTypeBroker, "1")["log.diskless.enable"]
		if !ok || c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceStaticBrokerConfig || !c.ReadOnly {
			t.Fatalf("default %v: log.diskless.enable described as %+v", def, c)
		}
		// A topic created compacted is not diskless under either default.
		if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "c"); err != nil {
			t.Fatal(err)
		}
		tc := describeConfigs(t, cl, kmsg.ConfigResourceTypeTopic, "c")["diskless.enable"]
		if tc.Value == nil || *tc.Value != "false" {
			t.Fatalf("default %v: a compacted topic's diskless.enable described as %v (source %v)", def, tc.Value, tc.Source)
		}
		found := false
		for _, s := range tc.ConfigSynonyms {
			found = found || s.Name == "log.diskless.enable" && s.Value != nil && *s.Value == want && s.Source == kmsg.ConfigSourceStaticBrokerConfig
		}
		if !found {
			t.Fatalf("default %v: diskless.enable's synonyms %+v lack the broker's", def, tc.ConfigSynonyms)
		}
	}
}
