package diskless

import "inlet/diskless/format"

// The commit objects' format is package format (diskless/format): these are its names as
// package diskless exports them to its users (the follower, the restore tools, the tests).

// Header is a commit object's header; Entry one of its batches or state entries.
type (
	Header = format.Header
	Entry  = format.Entry
)

// The kinds of state entry (format's).
const (
	StateGroupOffsets  = format.StateGroupOffsets
	StateTenants       = format.StateTenants
	StateBrokerConfigs = format.StateBrokerConfigs
	StateTxn           = format.StateTxn
	StateProducerIDs   = format.StateProducerIDs
	StateGroupRecords  = format.StateGroupRecords
	StatePartition     = format.StatePartition
	StateCheckpoint    = format.StateCheckpoint
	StateLogStart      = format.StateLogStart
)

// LogPrefix holds the commit objects: LogKey(n) for n = 1, 2, ...; the keys sort by number.
const LogPrefix = format.LogPrefix

// LogKey is commit object n's key.
func LogKey(n uint64) string { return format.LogKey(n) }

// ParseNumbered gives the number of a key of prefix (LogPrefix, CheckpointPrefix) followed by
// 20 digits; false for any other key, and for number 0.
func ParseNumbered(prefix, key string) (uint64, bool) { return format.ParseNumbered(prefix, key) }

// Decode checks a whole commit object and returns its header and entries (format.Decode).
func Decode(b []byte) (Header, []Entry, error) { return format.Decode(b) }
