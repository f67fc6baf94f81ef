package main

import "testing"

// TestAutoMemoryLimitCountsTheDisklessBacklog: --memory-limit auto adds
// --diskless-max-pending-bytes where diskless topics are possible (a bucket is set), beside
// --remote-read-cache and the checkpoints' fold (unless they are off), and none without a bucket.
func TestAutoMemoryLimitCountsTheDisklessBacklog(t *testing.T) {
	for _, tc := range []struct {
		args []string
		sasl bool
		want int64
	}{
		{nil, false, 320 << 20},
		{nil, true, 320<<20 + 16<<20}, // --sasl-server-max-inflight-bytes
		{[]string{"--diskless-max-pending-bytes", "1GiB"}, false, 320 << 20}, // no bucket: no diskless topic
		{[]string{"--s3-bucket", "b"}, false, 320<<20 + 64<<20 + 256<<20 + 48<<20},
		{[]string{"--s3-bucket", "b", "--diskless-max-pending-bytes", "1GiB", "--remote-read-cache", "16MiB"}, false, 320<<20 + 16<<20 + 1<<30 + 48<<20},
		{[]string{"--s3-bucket", "b", "--diskless-checkpoint-interval-ms", "0"}, false, 320<<20 + 64<<20 + 256<<20}, // no checkpoints
	} {
		_, o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := autoMemoryLimit(o, o.remote(), tc.sasl); got != tc.want {
			t.Errorf("%v (sasl %v): %d MiB, want %d MiB", tc.args, tc.sasl, got>>20, tc.want>>20)
		}
	}
}
