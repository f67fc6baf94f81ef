package wire

import (
	"encoding/binary"
	"fmt"
)

// flexibleVersions[k] is the first flexible (KIP-482) version of request key
// k, or -1 when the request has none. It is the "flexibleVersions" field of
// each clients/src/main/resources/common/message/*Request.json, as kmsg
// generates it; TestFlexibleVersionMatchesKmsg derives it again from
// kmsg.RequestForKey so that it cannot drift when kmsg is upgraded.
var flexibleVersions = [...]int16{
	0:  9,  // Produce
	1:  12, // Fetch
	2:  6,  // ListOffsets
	3:  9,  // Metadata
	4:  4,  // LeaderAndIsr
	5:  2,  // StopReplica
	6:  6,  // UpdateMetadata
	7:  3,  // ControlledShutdown
	8:  8,  // OffsetCommit
	9:  6,  // OffsetFetch
	10: 3,  // FindCoordinator
	11: 6,  // JoinGroup
	12: 4,  // Heartbeat
	13: 4,  // LeaveGroup
	14: 4,  // SyncGroup
	15: 5,  // DescribeGroups
	16: 3,  // ListGroups
	17: -1, // SaslHandshake: never flexible
	18: 3,  // ApiVersions
	19: 5,  // CreateTopics
	20: 4,  // DeleteTopics
	21: 2,  // DeleteRecords
	22: 2,  // InitProducerId
	23: 4,  // OffsetForLeaderEpoch
	24: 3,  // AddPartitionsToTxn
	25: 3,  // AddOffsetsToTxn
	26: 3,  // EndTxn
	27: 1,  // WriteTxnMarkers
	28: 3,  // TxnOffsetCommit
	29: 2,  // DescribeAcls
	30: 2,  // CreateAcls
	31: 2,  // DeleteAcls
	32: 4,  // DescribeConfigs
	33: 2,  // AlterConfigs
	34: 2,  // AlterReplicaLogDirs
	35: 2,  // DescribeLogDirs
	36: 2,  // SaslAuthenticate
	37: 2,  // CreatePartitions
	38: 2,  // CreateDelegationToken
	39: 2,  // RenewDelegationToken
	40: 2,  // ExpireDelegationToken
	41: 2,  // DescribeDelegationToken
	42: 2,  // DeleteGroups
	43: 2,  // ElectLeaders
	44: 1,  // IncrementalAlterConfigs
	45: 0,  // AlterPartitionReassignments
	46: 0,  // ListPartitionReassignments
	47: -1, // OffsetDelete: never flexible
	48: 1,  // DescribeClientQuotas
	49: 1,  // AlterClientQuotas
	50: 0,  // DescribeUserScramCredentials
	51: 0,  // AlterUserScramCredentials
	52: 0,  // Vote
	53: 1,  // BeginQuorumEpoch
	54: 1,  // EndQuorumEpoch
	55: 0,  // DescribeQuorum
	56: 0,  // AlterPartition
	57: 0,  // UpdateFeatures
	58: 0,  // Envelope
	59: 0,  // FetchSnapshot
	60: 0,  // DescribeCluster
	61: 0,  // DescribeProducers
	62: 0,  // BrokerRegistration
	63: 0,  // BrokerHeartbeat
	64: 0,  // UnregisterBroker
	65: 0,  // DescribeTransactions
	66: 0,  // ListTransactions
	67: 0,  // AllocateProducerIds
	68: 0,  // ConsumerGroupHeartbeat
	69: 0,  // ConsumerGroupDescribe
	70: 0,  // ControllerRegistration
	71: 0,  // GetTelemetrySubscriptions
	72: 0,  // PushTelemetry
	73: 0,  // AssignReplicasToDirs
	74: 0,  // ListConfigResources
	75: 0,  // DescribeTopicPartitions
	76: 0,  // ShareGroupHeartbeat
	77: 0,  // ShareGroupDescribe
	78: 0,  // ShareFetch
	79: 0,  // ShareAcknowledge
	80: 0,  // AddRaftVoter
	81: 0,  // RemoveRaftVoter
	82: 0,  // UpdateRaftVoter
	83: 0,  // InitializeShareGroupState
	84: 0,  // ReadShareGroupState
	85: 0,  // WriteShareGroupState
	86: 0,  // DeleteShareGroupState
	87: 0,  // ReadShareGroupStateSummary
	88: 0,  // StreamsGroupHeartbeat
	89: 0,  // StreamsGroupDescribe
	90: 0,  // DescribeShareGroupOffsets
	91: 0,  // AlterShareGroupOffsets
	92: 0,  // DeleteShareGroupOffsets
	93: 0,  // StreamsGroupTopologyDescriptionUpdate
	94: 0,  // UnregisterController
}

// FlexibleVersion returns the first flexible (KIP-482) request version of
// apiKey, or -1 if the request has none or the key is unknown. It covers every
// key kmsg knows (0..94 at kmsg v1.15.1, a superset of the 0..75 Inlet
// answers).
func FlexibleVersion(apiKey int16) int16 {
	if apiKey < 0 || int(apiKey) >= len(flexibleVersions) {
		return -1
	}
	return flexibleVersions[apiKey]
}

// isFlexible reports whether apiKey at version uses the flexible encoding
// and therefore request header v2 and response header v1.
func isFlexible(apiKey, version int16) bool {
	fv := FlexibleVersion(apiKey)
	return fv >= 0 && version >= fv
}

// ResponseHeaderFlexible reports whether the response to apiKey at version has
// header v1 (with its tag buffer): a flexible version, but never ApiVersions,
// whose responses use header v0 always (KIP-511).
func ResponseHeaderFlexible(apiKey, version int16) bool {
	return isFlexible(apiKey, version) && apiKey != 18
}

// RequestHeader is a parsed request header. ClientID aliases the frame.
type RequestHeader struct {
	APIKey, APIVersion int16
	CorrelationID      int32
	ClientID           []byte // aliases the frame; nil when null
	BodyOffset         int    // index in frame where the request body starts
}

// ParseRequestHeader parses a request header from frame, which is the request
// WITHOUT its 4-byte length prefix.
//
// The header version follows ApiMessageType.requestHeaderVersion: v2 (v1 plus
// a tagged field section) when the api/version is flexible, v1 otherwise.
// ApiVersions (key 18) v3+ is flexible like any other, so it takes header v2
// too; only its response header is special (see AppendResponseHeader).
// ControlledShutdown v0 is the one request with header v0, which has no client
// id. Unknown api keys parse as header v1, so that the server can still answer
// (or close) with the right correlation id.
//
// The client id is a plain NULLABLE_STRING even in header v2: Kafka keeps it
// non-compact so that a broker can read the header of a request whose version
// it does not know (RequestHeaderData.json, "flexibleVersions": "none" on
// ClientId).
//
// ParseRequestHeader does not allocate on success.
func ParseRequestHeader(frame []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, fmt.Errorf("wire: request header: %d bytes, need at least 8: %w", len(frame), errTruncated)
	}
	h.APIKey = int16(binary.BigEndian.Uint16(frame[0:]))
	h.APIVersion = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	if h.APIKey == 7 && h.APIVersion == 0 {
		h.BodyOffset = 8
		return h, nil
	}
	r := reader{b: frame, off: 8}
	h.ClientID = r.nullableString(false)
	if isFlexible(h.APIKey, h.APIVersion) {
		r.skipTags()
	}
	if r.err != nil {
		return h, fmt.Errorf("wire: request header key %d v%d at byte %d: %w", h.APIKey, h.APIVersion, r.errOff, r.err)
	}
	h.BodyOffset = r.off
	return h, nil
}

// AppendResponseHeader appends a 4-byte length placeholder, the correlation
// id and, when flexible, an empty tagged-field section (response header v1).
// ApiVersions responses always use header v0 (pass flexible=false) so that a
// client that sent a version the broker does not know can still parse the
// answer (KIP-511, ApiMessageType.responseHeaderVersion). Call
// PatchFrameLength after appending the body.
func AppendResponseHeader(dst []byte, correlationID int32, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// PatchFrameLength writes len(frame)-4 big-endian into frame[0:4]. frame must
// start with the placeholder that AppendResponseHeader wrote.
func PatchFrameLength(frame []byte) {
	binary.BigEndian.PutUint32(frame[0:4], uint32(len(frame)-4))
}
