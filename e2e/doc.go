// Package e2e holds Inlet's end-to-end tests: real Kafka clients (franz-go, librdkafka through
// confluent-kafka-go and kcat, sarama) and hand-built requests over real TCP against a broker
// started in-process on a loopback port. There is no non-test code; this file names the package.
package e2e
