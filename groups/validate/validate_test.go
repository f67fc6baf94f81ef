package validate

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// TestRegexRefusesBlowUps: a short expression whose repetitions compile to a huge program is
// INVALID_REGULAR_EXPRESSION before it is compiled, as are an overlong and a malformed one;
// expressions real subscriptions use, nested repetitions within the bound included, pass.
func TestRegexRefusesBlowUps(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("a{1000}", 140), // 980 bytes; 140,000 instructions
		"(a{100}){100}",
		strings.Repeat("a", MaxRegexLength+1),
		"(unclosed",
	} {
		if re, code, msg := Regex(s); code != wire.ErrInvalidRegularExpression || re != nil || msg == "" {
			t.Errorf("regex %.40q: code %d, want INVALID_REGULAR_EXPRESSION with a message", s, code)
		}
	}
	for _, s := range []string{"a.*", "(orders|payments|shipments)\\..*", "[a-z]+-[0-9]{1,3}", "(\\pL{30}){30}",
		strings.Repeat("a", MaxRegexLength)} {
		re, code, msg := Regex(s)
		if code != wire.ErrNone || re == nil {
			t.Errorf("regex %.40q refused: %s", s, msg)
			continue
		}
		if s == "a.*" && (!re.MatchString("abc") || re.MatchString("xabc")) {
			t.Errorf("a.* is not anchored at both ends")
		}
	}
}

// TestBoundsRefuseLongStrings: each id over MaxIDLength, too many subscribed names and a name
// no topic can have are INVALID_REQUEST; strings at the bounds pass.
func TestBoundsRefuseLongStrings(t *testing.T) {
	long, at := strings.Repeat("x", MaxIDLength+1), strings.Repeat("x", MaxIDLength)
	ok := func() *kmsg.ConsumerGroupHeartbeatRequest {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.InstanceID, r.RackID, r.ServerAssignor = "g", at, &at, &at, &at
		r.SubscribedTopicNames = []string{"a", "b", strings.Repeat("t", MaxTopicNameLength)}
		return r
	}
	if code, msg := Bounds(ok(), 3); code != wire.ErrNone {
		t.Fatalf("at the bounds: %d %s", code, msg)
	}
	for name, mod := range map[string]func(*kmsg.ConsumerGroupHeartbeatRequest){
		"member id":   func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = long },
		"instance id": func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = &long },
		"rack id":     func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = &long },
		"assignor":    func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = &long },
		"names": func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames = append(r.SubscribedTopicNames, "c")
		},
		"long name": func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames[0] = strings.Repeat("t", MaxTopicNameLength+1)
		},
	} {
		r := ok()
		mod(r)
		if code, msg := Bounds(r, 3); code != wire.ErrInvalidRequest || msg == "" {
			t.Errorf("%s: code %d, want INVALID_REQUEST with a message", name, code)
		}
	}
}
