package wire

// Kafka error codes: every code Inlet answers with is defined here and nowhere else, as
// org.apache.kafka.common.protocol.Errors numbers it (the comment names the Java constant
// when it differs from the Go name). TestErrorCodesAreKafkas checks each against franz-go's
// kerr.
const (
	ErrUnknownServerError                 int16 = -1
	ErrNone                               int16 = 0
	ErrCorruptMessage                     int16 = 2
	ErrUnknownTopicOrPartition            int16 = 3
	ErrLeaderNotAvailable                 int16 = 5
	ErrNotLeaderOrFollower                int16 = 6 // NOT_LEADER_OR_FOLLOWER, formerly NOT_LEADER_FOR_PARTITION
	ErrRequestTimedOut                    int16 = 7
	ErrMessageTooLarge                    int16 = 10
	ErrInvalidTopic                       int16 = 17 // INVALID_TOPIC_EXCEPTION
	ErrRecordListTooLarge                 int16 = 18
	ErrNotEnoughReplicas                  int16 = 19
	ErrNotEnoughReplicasAfterAppend       int16 = 20
	ErrInvalidRequiredAcks                int16 = 21
	ErrTopicAuthorizationFailed           int16 = 29
	ErrClusterAuthorizationFailed         int16 = 31
	ErrInvalidTimestamp                   int16 = 32
	ErrUnsupportedVersion                 int16 = 35
	ErrInvalidRequest                     int16 = 42
	ErrUnsupportedForMessageFormat        int16 = 43
	ErrOutOfOrderSequenceNumber           int16 = 45
	ErrDuplicateSequenceNumber            int16 = 46
	ErrInvalidProducerEpoch               int16 = 47
	ErrInvalidTxnState                    int16 = 48
	ErrInvalidProducerIDMapping           int16 = 49
	ErrTransactionalIDAuthorizationFailed int16 = 53
	ErrKafkaStorageError                  int16 = 56
	ErrUnknownProducerID                  int16 = 59
	ErrUnsupportedCompressionType         int16 = 76
	ErrInvalidRecord                      int16 = 87
	ErrThrottlingQuotaExceeded            int16 = 89
	ErrProducerFenced                     int16 = 90

	// The transaction coordinator.
	ErrCoordinatorLoadInProgress    int16 = 14
	ErrInvalidTransactionTimeout    int16 = 50
	ErrConcurrentTransactions       int16 = 51
	ErrTransactionCoordinatorFenced int16 = 52
	ErrOperationNotAttempted        int16 = 55
	ErrUnstableOffsetCommit         int16 = 88
	ErrTransactionalIDNotFound      int16 = 105

	// The admin, group and security paths.
	ErrOffsetOutOfRange          int16 = 1
	ErrOffsetMetadataTooLarge    int16 = 12
	ErrCoordinatorNotAvailable   int16 = 15
	ErrNotCoordinator            int16 = 16
	ErrIllegalGeneration         int16 = 22
	ErrInconsistentGroupProtocol int16 = 23
	ErrInvalidGroupID            int16 = 24
	ErrUnknownMemberID           int16 = 25
	ErrInvalidSessionTimeout     int16 = 26
	ErrRebalanceInProgress       int16 = 27
	ErrGroupAuthorizationFailed  int16 = 30
	ErrUnsupportedSaslMechanism  int16 = 33
	ErrIllegalSaslState          int16 = 34
	ErrTopicAlreadyExists        int16 = 36
	ErrInvalidPartitions         int16 = 37
	ErrInvalidReplicationFactor  int16 = 38
	ErrInvalidReplicaAssignment  int16 = 39
	ErrInvalidConfig             int16 = 40
	ErrPolicyViolation           int16 = 44
	ErrSecurityDisabled          int16 = 54
	ErrSaslAuthenticationFailed  int16 = 58
	ErrNonEmptyGroup             int16 = 68
	ErrGroupIDNotFound           int16 = 69
	ErrFencedLeaderEpoch         int16 = 74
	ErrUnknownLeaderEpoch        int16 = 75
	ErrMemberIDRequired          int16 = 79
	ErrGroupMaxSizeReached       int16 = 81
	ErrFencedInstanceID          int16 = 82
	ErrElectionNotNeeded         int16 = 84
	ErrNoReassignmentInProgress  int16 = 85
	ErrGroupSubscribedToTopic    int16 = 86
	ErrResourceNotFound          int16 = 91
	ErrDuplicateResource         int16 = 92
	ErrUnacceptableCredential    int16 = 93
	ErrInvalidUpdateVersion      int16 = 95
	ErrUnknownTopicID            int16 = 100
	ErrFencedMemberEpoch         int16 = 110
	ErrUnreleasedInstanceID      int16 = 111
	ErrUnsupportedAssignor       int16 = 112
	ErrStaleMemberEpoch          int16 = 113
	ErrMismatchedEndpointType    int16 = 114
	ErrUnsupportedEndpointType   int16 = 115
	ErrInvalidRegularExpression  int16 = 128
)
