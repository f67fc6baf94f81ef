// Package objstore is the broker's view of one S3-compatible bucket: whole-object writes that
// succeed only once per key, ranged reads, ordered listing and idempotent deletes, under a key
// prefix. The tiered log writes each remote object once and never rewrites it. One small object
// is rewritten in place, the writer's lease (package lease): PutIf replaces it only while it is
// the version the writer read (If-Match on its ETag), and Get reads it whole with its ETag. A
// bucket's other features (multipart uploads, versioning, metadata) are not used.
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
// [ErrOutOfRange], a PutIf whose ETag no longer matches one that matches
// [ErrPreconditionFailed]. Every other error says nothing of the object: most are transient (network,
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
	// to say (OpenS3: see there). A *Buffers body is read only until Put returns, so the
	// caller may reuse the memory behind it at once (the diskless commit objects' request
	// frames).
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

	// PutIf writes the object whole on a condition and returns its new ETag. With ifMatch
	// "" it is Put (If-None-Match: *, ErrExists if an object has the key); otherwise it
	// replaces the object only while its ETag is ifMatch (If-Match): another ETag gives
	// ErrPreconditionFailed, a missing object ErrNotFound. body is read from its start and
	// must hold size bytes.
	//
	// An ETag names the object's bytes (S3 uses their MD5 for a single PUT), not the write:
	// a caller that must tell its writes apart puts something unique in each body.
	//
	// A lost reply looks like the other errors here too: a PutIf that landed and was retried
	// answers ErrExists or ErrPreconditionFailed; the caller reads the object back (Get) to
	// tell its own write from another's.
	PutIf(ctx context.Context, key string, body io.ReadSeeker, size int64, ifMatch string) (etag string, err error)
	// Get reads a small object whole (at most MaxGetBytes) with its ETag, the value PutIf's
	// ifMatch takes. A missing key gives ErrNotFound.
	Get(ctx context.Context, key string) (data []byte, etag string, err error)
}

// MaxGetBytes bounds what Get reads: it is for small objects (a lease, a manifest), read into
// memory whole.
const MaxGetBytes = 16 << 20

var (
	// ErrNotFound: no object has the key.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: a conditional Put found an object with the key already.
	ErrExists = errors.New("objstore: object already exists")
	// ErrBadDigest: the bucket received a body other than the one whose checksum came with it
	// (Checksummed) and stored nothing; a PUT to try again.
	ErrBadDigest = errors.New("objstore: the body does not match its checksum")
	// ErrOutOfRange: a ReadAt asked for bytes outside the object.
	ErrOutOfRange = errors.New("objstore: range outside the object")
	// ErrPreconditionFailed: a PutIf's ifMatch is no longer the object's ETag (another
	// write replaced it), HTTP 412.
	ErrPreconditionFailed = errors.New("objstore: precondition failed: the object changed")
)

// Op names a Bucket method, for Memory's fault injection and counters.
type Op int

const (
	OpPut Op = iota
	OpReadAt
	OpList
	OpDelete
	OpPutIf
	OpGet
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
	case OpPutIf:
		return "putif"
	case OpGet:
		return "get"
	}
	return "op?"
}
