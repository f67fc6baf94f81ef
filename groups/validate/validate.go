// Package validate checks the fields of a group request before the group coordinator acts on
// it: Kafka's validation of a ConsumerGroupHeartbeat and of a JoinGroup's names, and Inlet's
// bounds on a heartbeat's ids, subscribed names and regular expression (the rest of the
// KIP-848 bounds need a group's state and stay in package groups: consumer_bounds.go). Pure
// functions: no I/O, no state; the heartbeat's checks answer a Kafka error code and its
// message (wire.ErrNone and "" when the request passes).
package validate

import (
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

const (
	// MaxTopicNameLength is Kafka's Topic.MAX_NAME_LENGTH: a subscribed name longer than any
	// topic can have is refused rather than kept.
	MaxTopicNameLength = 249
	// MaxIDLength bounds member, instance and rack ids (clients send a 22-character UUID, a
	// configured instance id, a rack name); the coordinator cuts client ids to it.
	MaxIDLength = 255
	// MaxRegexLength bounds SubscribedTopicRegex (Kafka has no bound): a longer one is
	// INVALID_REGULAR_EXPRESSION.
	MaxRegexLength = 1024
	// maxRegexProgram bounds the RE2 program a regular expression compiles to: about what a
	// MaxRegexLength regex of plain literals compiles to, so only repetition blow-ups
	// (a{1000}a{1000}...: 1 KiB that compiles to 140,000 instructions, 6 MB and 0.1 s) are
	// refused. Matching costs at most the program size per byte of a topic name.
	maxRegexProgram = 1100
)

// Heartbeat is KafkaApis and GroupMetadataManager's request validation
// (throwIfConsumerGroupHeartbeatRequestIsInvalid): INVALID_REQUEST with Kafka's message.
func Heartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	switch {
	case req.Group == "" || !wire.ValidName(req.Group):
		return wire.ErrInvalidGroupID, "GroupId can't be empty."
	case req.Version >= 1 && req.MemberID == "":
		return wire.ErrInvalidRequest, "MemberId can't be empty."
	case !wire.ValidName(req.MemberID) && req.MemberID != "":
		return wire.ErrInvalidRequest, "MemberId is invalid."
	case req.InstanceID != nil && (*req.InstanceID == "" || !wire.ValidName(*req.InstanceID)):
		return wire.ErrInvalidRequest, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return wire.ErrInvalidRequest, "RackId can't be empty."
	case req.MemberEpoch < -2:
		return wire.ErrInvalidRequest, "MemberEpoch is invalid."
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return wire.ErrInvalidRequest, "InstanceId can't be null."
	case req.MemberEpoch > 0 && req.MemberID == "":
		return wire.ErrInvalidRequest, "MemberId can't be empty."
	}
	if req.MemberEpoch == 0 {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return wire.ErrInvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case len(req.Topics) > 0 || req.Topics == nil:
			return wire.ErrInvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return wire.ErrInvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	for _, t := range req.SubscribedTopicNames {
		if !wire.ValidName(t) {
			return wire.ErrInvalidRequest, "SubscribedTopicNames holds an invalid name."
		}
	}
	if req.ServerAssignor != nil && !wire.ValidName(*req.ServerAssignor) {
		return wire.ErrInvalidRequest, "ServerAssignor is invalid."
	}
	return wire.ErrNone, ""
}

// Regex compiles a SubscribedTopicRegex (RE2, as Kafka 4 takes it with re2j).
func Regex(s string) (*regexp.Regexp, int16, string) {
	if len(s) > MaxRegexLength {
		return nil, wire.ErrInvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex is longer than %d bytes.", MaxRegexLength)
	}
	parsed, err := syntax.Parse("^(?:"+s+")$", syntax.Perl)
	if err == nil && regexProgramSize(parsed, maxRegexProgram) > maxRegexProgram {
		return nil, wire.ErrInvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex `%s` is too complex: it compiles to more than %d instructions.", s, maxRegexProgram)
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, wire.ErrInvalidRegularExpression, "SubscribedTopicRegex `" + s + "` is not a valid regular expression: " + err.Error()
	}
	return re, wire.ErrNone, ""
}

// Bounds checks a heartbeat's strings against the bounds: ids of at most MaxIDLength
// bytes, at most maxSubscribed subscribed names (the coordinator's MaxSubscribedTopics) of at
// most MaxTopicNameLength bytes (INVALID_REQUEST).
func Bounds(req *kmsg.ConsumerGroupHeartbeatRequest, maxSubscribed int) (int16, string) {
	switch {
	case len(req.MemberID) > MaxIDLength:
		return wire.ErrInvalidRequest, fmt.Sprintf("MemberId is longer than %d bytes.", MaxIDLength)
	case req.InstanceID != nil && len(*req.InstanceID) > MaxIDLength:
		return wire.ErrInvalidRequest, fmt.Sprintf("InstanceId is longer than %d bytes.", MaxIDLength)
	case req.RackID != nil && len(*req.RackID) > MaxIDLength:
		return wire.ErrInvalidRequest, fmt.Sprintf("RackId is longer than %d bytes.", MaxIDLength)
	case req.ServerAssignor != nil && len(*req.ServerAssignor) > MaxIDLength:
		return wire.ErrInvalidRequest, fmt.Sprintf("ServerAssignor is longer than %d bytes.", MaxIDLength)
	case len(req.SubscribedTopicNames) > maxSubscribed:
		return wire.ErrInvalidRequest, fmt.Sprintf("SubscribedTopicNames holds %d names; a member subscribes to at most %d by name (a regular expression subscribes to more).",
			len(req.SubscribedTopicNames), maxSubscribed)
	}
	for _, t := range req.SubscribedTopicNames {
		if len(t) > MaxTopicNameLength {
			return wire.ErrInvalidRequest, fmt.Sprintf("SubscribedTopicNames holds a name longer than %d characters, which no topic can have.", MaxTopicNameLength)
		}
	}
	return wire.ErrNone, ""
}

// regexProgramSize estimates the RE2 program a parsed expression compiles to, without
// compiling it (compiling a blow-up is the cost being bounded): repetitions multiply their
// operand, as syntax.Compile expands them. It saturates at limit+1.
func regexProgramSize(re *syntax.Regexp, limit int) int {
	n := 0
	add := func(k int) {
		n += k
		if n > limit {
			n = limit + 1
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		add(len(re.Rune))
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			add(regexProgramSize(sub, limit))
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			add(regexProgramSize(sub, limit) + 1)
		}
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		add(regexProgramSize(re.Sub[0], limit) + 2)
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		sub := max(regexProgramSize(re.Sub[0], limit), 1)
		if times > 0 && sub > (limit+1)/times {
			add(limit + 1)
		} else {
			add(times * sub)
		}
	default:
		add(1)
	}
	return n
}

// JoinNames checks the strings of a JoinGroup that the group's record keeps (the group
// id is checked apart, for its own error code): INVALID_REQUEST otherwise, as Kafka closes a
// connection whose request holds a string it cannot read (wire.ValidName).
func JoinNames(req *kmsg.JoinGroupRequest) bool {
	if !wire.ValidName(req.MemberID) || !wire.ValidName(req.ProtocolType) || req.InstanceID != nil && !wire.ValidName(*req.InstanceID) {
		return false
	}
	for _, p := range req.Protocols {
		if !wire.ValidName(p.Name) {
			return false
		}
	}
	return true
}
