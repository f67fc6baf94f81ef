package e2e

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// TestApiVersionsUnknownVersionGetsV0Answer guards KIP-511: a client that opens with an
// ApiVersions version newer than the broker's gets a v0 response (header v0) with
// UNSUPPORTED_VERSION and the broker's ranges, so it can retry at a version both know,
// instead of a closed connection.
func TestApiVersionsUnknownVersionGetsV0Answer(t *testing.T) {
	b := startBroker(t, nil)
	rc := dialRaw(t, b.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	req.ClientSoftwareName, req.ClientSoftwareVersion = "inlet-e2e", "1"
	corr := rc.send(req)
	gotCorr, body, err := rc.readFrame(5 * time.Second)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if gotCorr != corr {
		t.Fatalf("correlation id %d, want %d", gotCorr, corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("the answer is not a v0 ApiVersions response: %v", err)
	}
	if resp.ErrorCode != 35 {
		t.Errorf("error code %d, want UNSUPPORTED_VERSION (35)", resp.ErrorCode)
	}
	checkAdvertised(t, resp.ApiKeys)
	rc.alive()
}

// TestApiVersionsAdvertisesServedRanges guards the advertised ranges at every ApiVersions
// version: librdkafka and sarama pick request versions from them, so a range the broker
// does not serve (or one it serves but does not list) breaks clients.
func TestApiVersionsAdvertisesServedRanges(t *testing.T) {
	b := startBroker(t, nil)
	rc := dialRaw(t, b.addr)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "inlet-e2e", "1"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Errorf("v%d: error code %d", v, resp.ErrorCode)
		}
		checkAdvertised(t, resp.ApiKeys)
		// v3+ lists the features (KIP-584): group.version 0-1, finalized at 1 (KIP-848 on, as
		// by default), and nothing else: transaction.version >= 2 (KIP-890) must not be
		// advertised while it is not served.
		wantSupported, wantFinalized := "[]", "[]"
		if v >= 3 {
			wantSupported, wantFinalized = "[group.version 0-1]", "[group.version 1-1]"
		}
		var sup, fin []string
		for _, f := range resp.SupportedFeatures {
			sup = append(sup, fmt.Sprintf("%s %d-%d", f.Name, f.MinVersion, f.MaxVersion))
		}
		for _, f := range resp.FinalizedFeatures {
			fin = append(fin, fmt.Sprintf("%s %d-%d", f.Name, f.MinVersionLevel, f.MaxVersionLevel))
		}
		if fmt.Sprint(sup) != wantSupported || fmt.Sprint(fin) != wantFinalized || v >= 3 && resp.FinalizedFeaturesEpoch < 0 {
			t.Errorf("v%d: features supported %v, finalized %v (epoch %d); want %s and %s", v, sup, fin, resp.FinalizedFeaturesEpoch, wantSupported, wantFinalized)
		}
	}
}

// checkAdvertised compares an ApiVersions key list with what the server registers and pins
// the version ranges the node's protocol handling depends on.
func checkAdvertised(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	got := map[int16][2]int16{}
	for _, k := range keys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{}
	for _, k := range server.SupportedAPIs() {
		want[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("advertised %v, server registers %v", got, want)
	}
	pinned := []struct {
		key      int16
		name     string
		min, max int16
	}{
		{0, "Produce", 3, 12},    // v13 needs topic ids
		{1, "Fetch", 4, 12},      // v13 needs topic ids
		{2, "ListOffsets", 0, 8}, // v8: earliest-local (tiered storage); v9+ (latest-tiered) is not served
		{3, "Metadata", 0, 12},
		{18, "ApiVersions", 0, 4},
		{22, "InitProducerId", 0, 4}, // v5+ is KIP-890
	}
	for _, p := range pinned {
		r, ok := got[p.key]
		if !ok {
			t.Errorf("%s (%d) not advertised", p.name, p.key)
			continue
		}
		if r != [2]int16{p.min, p.max} {
			t.Errorf("%s advertised v%d-v%d, want v%d-v%d", p.name, r[0], r[1], p.min, p.max)
		}
	}
}
