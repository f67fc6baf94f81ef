package batchlog

// DisklessCommitter (package diskless) puts diskless partitions' batches into the bucket:
// Commit, on the completer, takes a group durable here and copies its Appends' batches before
// it returns, then calls Publish and Answer once each, groups in the given order.
type DisklessCommitter interface{ Commit(*DisklessGroup) }

// DisklessGroup is what a group holds back: its diskless appends, advances and requests.
type DisklessGroup struct {
	Appends  []*Append
	advances []hwAdvance
	requests []*Request
}

func (d *DisklessGroup) Publish() { publish(d.advances) }

// Answer completes the requests; a code fails their appends not refused already.
func (d *DisklessGroup) Answer(code int16) {
	for _, r := range d.requests {
		failAppends([]*Request{r}, code)
		r.Completion.Completed(r)
	}
}
