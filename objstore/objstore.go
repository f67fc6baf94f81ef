// Package objstore is the broker's view of one S3-compatible bucket: whole-object writes that
// succeed only once per key, ranged reads, ordered listing and idempotent deletes, under a key
// prefix. The tiered log writes each remote object once and never rewrites it, so this is all it
// needs; a bucket's other features (multipart uploads, versioning, metadata) are not used.
//
// Two implementations stand behind [Bucket]:
//
//   - s3.go: [OpenS3], aws-sdk-go-v2's S3 client with bounded retries and per-attempt timeouts,
//     so that a down or hung server returns an error within seconds and the caller retries
//     with its own backoff.
//   - memory.go: [Memory], an in-process bucket with injected faults (down, failing, slow, lost
//     replies) and call counters, for unit tests of failure paths.
//
// The subpackage objtest starts a real S3 server (versitygw) on loopback for tests.
//
// Errors: a missing key gives an error that [errors.Is] matches against [ErrNotFound], a Put of
// an existing key one that matches [ErrExists], a read past an object's end one that matches
// [ErrOutOfRange]. Every other error says nothing of the object: most are transient (network,
// 5xx, throttling, timeouts), some last until an operator acts (a missing bucket, denied
// credentials); retrying the same call later is always safe, and logging it tells which.
//
// There are no locks held across calls in this package; Memory guards its state with one mutex.
package objstore

import (
	"context"
	"errors"
	"io"
)

// Bucket is one S3-compatible bucket seen under a key prefix: every key and prefix passed to it
// is relative to that prefix. Implementations are safe for concurrent use.
type Bucket interface {
	// Put writes the object whole, only if no object has the key yet (a conditional PUT,
	// If-None-Match: *); it returns an error matching ErrExists if one does. body is read
	// from its start (Put seeks it to 0) and must hold size bytes. The body is streamed,
	// never copied whole into memory; how many times it is read is the implementation's
	// to say (OpenS3: see there).
	//
	// ErrExists can also answer a Put whose own earlier attempt landed: a reply lost on
	// the way back and the request retried, by the SDK within one call or by the caller
	// across calls. A caller that may retry treats ErrExists as "an object is there" and
	// checks that it is its own (its size, from List, or its bytes) before relying on it.
	Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error
	// ReadAt fills dst with the bytes of key starting at off, in one ranged GET. A missing
	// key gives ErrNotFound; a range that does not lie wholly inside the object gives
	// ErrOutOfRange (an empty dst at off == size is inside).
	ReadAt(ctx context.Context, key string, off int64, dst []byte) error
	// List calls fn for each object whose key starts with prefix, in ascending byte order of
	// keys, with the key relative to the bucket prefix and the object's size. An error from
	// fn stops the listing and is returned.
	List(ctx context.Context, prefix string, fn func(key string, size int64) error) error
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

var (
	// ErrNotFound: no object has the key.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: a conditional Put found an object with the key already.
	ErrExists = errors.New("objstore: object already exists")
	// ErrOutOfRange: a ReadAt asked for bytes outside the object.
	ErrOutOfRange = errors.New("objstore: range outside the object")
)

// Op names a Bucket method, for Memory's fault injection and counters.
type Op int

const (
	OpPut Op = iota
	OpReadAt
	OpList
	OpDelete
	numOps
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpReadAt:
		return "readat"
	case OpList:
		return "list"
	case OpDelete:
		return "delete"
	}
	return "op?"
}
