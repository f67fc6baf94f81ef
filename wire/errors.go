package wire

// Kafka error codes used by the produce path. Values are the codes of
// org.apache.kafka.common.protocol.Errors; the comment names the Java constant
// when it differs from the Go name.
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
	ErrProducerFenced                     int16 = 90
)
