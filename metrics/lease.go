package metrics

import (
	"inlet/lease"
)

// Lease is what the bucket lease's collector reads at scrape time (*lease.Lease implements it).
type Lease interface {
	State() lease.State
}

// WatchLease adds the bucket prefix's lease (inlet_bucket_*, role.go) to what is scraped, and
// to what /readyz tells: 503 while this node is not the prefix's writer.
func (m *Metrics) WatchLease(l Lease) {
	m.registerRole()
	m.lease.Store(&l)
}

var (
	leaseEpochDesc  = desc("bucket_lease_epoch", "Epoch of this node's lease of its bucket prefix: it rises by one at each take, and every object the node writes carries it.")
	leaseWriterDesc = desc("bucket_writer", "1 while this node holds its bucket prefix's lease and may acknowledge produce, 0 while it does not (its last renewal too old, or fenced).")
	leaseFencedDesc = desc("bucket_fenced_total", "Times this node learned that another node took its bucket prefix (it then acknowledges nothing more until restarted).")
)

// leaseNotHeld is why /readyz fails for the lease ("" while this node is the writer, or has
// no bucket).
func (m *Metrics) leaseNotHeld() string {
	l := m.lease.Load()
	if l == nil {
		return ""
	}
	return (*l).State().NotWritableReason()
}
