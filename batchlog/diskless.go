package batchlog

// DisklessCommitter (package diskless) puts diskless partitions' batches into the bucket:
// Commit, on the completer, takes a group durable here, then calls Publish and Answer once
// each, groups in the given order. It may keep its Appends' batches (slices of the produce
// requests' frames) until it answers the group: a request's frame is given back only once
// the request is answered.
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
