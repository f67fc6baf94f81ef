package objstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// S3Config names one bucket and how to reach it. Credentials come from the standard AWS chain
// (environment, shared config and credentials files, then the instance's role) unless
// Credentials is set.
type S3Config struct {
	// Bucket is the bucket's name; it must exist (OpenS3 does not create it).
	Bucket string
	// Endpoint is the server's base URL ("http://127.0.0.1:7070"); empty means AWS.
	Endpoint string
	// Region is the bucket's region; empty takes the chain's (AWS_REGION, the shared config),
	// and "us-east-1" when that is empty too.
	Region string
	// Prefix is put before every key: a trailing "/" is added when missing, leading "/"s
	// are dropped. Empty means the bucket's root.
	Prefix string
	// PathStyle addresses the bucket as endpoint/bucket/key rather than bucket.endpoint/key,
	// as most servers other than AWS need.
	PathStyle bool

	// Timeout bounds each attempt's wait for a connection and for the server's response
	// headers (not the transfer of the body, which the caller's context bounds); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the SDK's attempts per call (its standard retryer, with backoff up
	// to one second between attempts); 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Credentials, when set, replaces the standard chain (tests use static keys).
	Credentials aws.CredentialsProvider
}

// The defaults keep a down or hung server visible to the caller within seconds: a refused
// connection fails each attempt at once, so three attempts with backoff take about two seconds;
// a server that accepts but does not answer is given DefaultTimeout per attempt. The caller
// (the uploader) retries with its own, longer backoff, so the SDK must not hide an outage.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAttempts = 3
)

type s3Bucket struct {
	client *s3.Client
	bucket string
	prefix string
	// plainHTTP: the endpoint is http://; Put sends the payload unsigned (OpenS3).
	plainHTTP bool
}

// OpenS3 returns the Bucket that cfg names. It does not contact the server: a server that is
// down at start shows as errors from the calls, which the caller retries.
//
// Put streams the body. How many times it reads it depends on the scheme:
//   - https: once. The payload is sent unsigned ("STREAMING-UNSIGNED-PAYLOAD-TRAILER") with a
//     CRC32 checksum in the trailer of the aws-chunked body, which the server verifies; TLS
//     protects the rest.
//   - plain http: once too. The payload is sent as UNSIGNED-PAYLOAD with no checksum header:
//     SigV4 would otherwise sign its SHA-256 (and a CRC32 header), reading the body once to
//     hash it and again to send it, a SHA-256 of every byte uploaded (a fifth of the broker's
//     CPU under a produce load flat out, profiles/cpu-tier-produce-20261202.pprof). What is
//     uploaded carries its own checks: each record batch its CRC-32C, which every consumer
//     verifies, and the tier's footer its own CRC; the headers stay signed. A bucket reached
//     over plain http is on a network trusted not to tamper with it anyway.
//
// A retried attempt reads it again from its start.
func OpenS3(ctx context.Context, cfg S3Config) (Bucket, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: S3Config.Bucket is empty")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	attempts := cfg.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = timeout }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = timeout
			t.ResponseHeaderTimeout = timeout
			t.MaxIdleConnsPerHost = 64
		})
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = time.Second
				// No client-side retry quota: with it, a long outage empties the
				// token bucket and later calls fail with a quota error instead of
				// the server's; the attempts are bounded anyway.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Set here, not in the loaded configuration: loading adds a CA bundle from the
		// environment to the buildable client, which this one wraps.
		o.HTTPClient = newVectoredClient(o.HTTPClient, timeout)
		// Pinned (AWS_REQUEST_CHECKSUM_CALCULATION could change it) because Put's
		// doc comment counts the body's reads under it: a CRC32 on every upload,
		// trailing the body over https.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		// Every read is ranged, and a range cannot be checked against the whole
		// object's checksum: without this the SDK logs that it skipped the check,
		// once per read, on the broker's stderr.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &s3Bucket{client: client, bucket: cfg.Bucket, prefix: normPrefix(cfg.Prefix),
		plainHTTP: strings.HasPrefix(strings.ToLower(cfg.Endpoint), "http://")}, nil
}

func normPrefix(p string) string {
	p = strings.TrimLeft(p, "/")
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

func (b *s3Bucket) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("objstore: put %s: rewinding the body: %w", key, err)
	}
	var optFns []func(*s3.Options)
	if b.plainHTTP {
		optFns = append(optFns, func(o *s3.Options) {
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		})
	}
	var crc *string
	if c, ok := body.(Checksummed); ok {
		if sum, ok := c.CRC32C(); ok {
			crc = aws.String(base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum)))
		}
	}
	if sb, ok := body.(Streamed); ok && b.plainHTTP {
		// Written by vectoredClient, with no Expect: 100-continue (a round trip before
		// every body).
		ctx = context.WithValue(ctx, vectoredBodyKey{}, sb)
		optFns = append(optFns, func(o *s3.Options) { o.ContinueHeaderThresholdBytes = -1 })
	} else if bufs, ok := body.(*Buffers); ok {
		// net/http may read a body after the call returns (vectored.go): a copy of its own.
		body = bytes.NewReader(bufs.Bytes())
	}
	_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           aws.String(b.prefix + key),
		Body:          body,
		ContentLength: aws.Int64(size),
		IfNoneMatch:   aws.String("*"),
		// With a sum, the SDK computes none over https either (its trailing CRC32).
		ChecksumCRC32C: crc,
	}, optFns...)
	if err != nil {
		return wrapErr("put", key, err)
	}
	return nil
}

func (b *s3Bucket) PutIf(ctx context.Context, key string, body io.ReadSeeker, size int64, ifMatch string) (string, error) {
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("objstore: putif %s: rewinding the body: %w", key, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           aws.String(b.prefix + key),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	if ifMatch == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifMatch)
	}
	var optFns []func(*s3.Options)
	if b.plainHTTP {
		optFns = append(optFns, func(o *s3.Options) {
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		})
	}
	out, err := b.client.PutObject(ctx, in, optFns...)
	if err != nil {
		werr := wrapErr("putif", key, err)
		if ifMatch != "" && errors.Is(werr, ErrExists) {
			// 412 to If-Match: the object is another version now.
			return "", fmt.Errorf("objstore: putif %s: %w: %w", key, ErrPreconditionFailed, err)
		}
		return "", werr
	}
	if aws.ToString(out.ETag) == "" {
		return "", fmt.Errorf("objstore: putif %s: the server returned no ETag", key)
	}
	return aws.ToString(out.ETag), nil
}

func (b *s3Bucket) Get(ctx context.Context, key string) ([]byte, string, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)})
	if err != nil {
		return nil, "", wrapErr("get", key, err)
	}
	defer out.Body.Close()
	n := aws.ToInt64(out.ContentLength)
	if n < 0 || n > MaxGetBytes {
		return nil, "", fmt.Errorf("objstore: get %s: object has %d bytes, more than %d", key, n, MaxGetBytes)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(out.Body, data); err != nil {
		return nil, "", fmt.Errorf("objstore: get %s: %w", key, err)
	}
	if aws.ToString(out.ETag) == "" {
		return nil, "", fmt.Errorf("objstore: get %s: the server returned no ETag", key)
	}
	return data, aws.ToString(out.ETag), nil
}

func (b *s3Bucket) ReadAt(ctx context.Context, key string, off int64, dst []byte) error {
	if off < 0 || off > math.MaxInt64-int64(len(dst)) {
		return fmt.Errorf("objstore: read %s at %d: %w", key, off, ErrOutOfRange)
	}
	if len(dst) == 0 {
		// HTTP cannot ask for an empty range; a HEAD says whether off lies in the object.
		out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)})
		if err != nil {
			return wrapErr("read", key, err)
		}
		if off > aws.ToInt64(out.ContentLength) {
			return fmt.Errorf("objstore: read %s at %d: object has %d bytes: %w", key, off, aws.ToInt64(out.ContentLength), ErrOutOfRange)
		}
		return nil
	}
	end := off + int64(len(dst)) - 1
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &b.bucket,
		Key:    aws.String(b.prefix + key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
	})
	if err != nil {
		return wrapErr("read", key, err)
	}
	defer out.Body.Close()
	// A range that starts inside the object but ends past it is answered with the bytes that
	// exist (206 and a shorter Content-Length); that is out of range here.
	if n := aws.ToInt64(out.ContentLength); n != int64(len(dst)) {
		return fmt.Errorf("objstore: read %s [%d, %d]: server returned %d bytes: %w", key, off, end, n, ErrOutOfRange)
	}
	if _, err := io.ReadFull(out.Body, dst); err != nil {
		return fmt.Errorf("objstore: read %s [%d, %d]: %w", key, off, end, err)
	}
	return nil
}

func (b *s3Bucket) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{
		Bucket: &b.bucket,
		Prefix: aws.String(b.prefix + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return wrapErr("list", prefix, err)
		}
		for _, o := range page.Contents {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), b.prefix)
			if !ok {
				return fmt.Errorf("objstore: list %s: server returned key %q outside the prefix %q", prefix, aws.ToString(o.Key), b.prefix)
			}
			if err := fn(k, aws.ToInt64(o.Size)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *s3Bucket) Delete(ctx context.Context, key string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)})
	if err != nil {
		if err = wrapErr("delete", key, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// wrapErr maps the server's answers that mean something to the caller onto this package's
// errors, keeping the SDK's error in the chain for logs.
func wrapErr(op, key string, err error) error {
	var sentinel error
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			sentinel = ErrNotFound
		case "PreconditionFailed":
			sentinel = ErrExists
			// AWS answers 409 ConditionalRequestConflict to a conditional PUT that
			// races another write of the key in flight: transient, left unmapped.
		case "InvalidRange":
			sentinel = ErrOutOfRange
		case "BadDigest":
			sentinel = ErrBadDigest
		}
	}
	var respErr *awshttp.ResponseError
	if sentinel == nil && errors.As(err, &respErr) {
		switch respErr.HTTPStatusCode() {
		case http.StatusNotFound:
			// A 404 without a code is a HEAD's; a missing bucket says NoSuchBucket
			// and is not mapped.
			if apiErr == nil || apiErr.ErrorCode() != "NoSuchBucket" {
				sentinel = ErrNotFound
			}
		case http.StatusPreconditionFailed:
			sentinel = ErrExists
		case http.StatusRequestedRangeNotSatisfiable:
			sentinel = ErrOutOfRange
		}
	}
	if sentinel != nil {
		return fmt.Errorf("objstore: %s %s: %w: %w", op, key, sentinel, err)
	}
	return fmt.Errorf("objstore: %s %s: %w", op, key, err)
}
