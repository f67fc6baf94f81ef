package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds on client-made state (README's "Hostile clients"): what each bound holds now and
// what it refused, read at scrape time from the node (WatchLimits). Before the node names its
// source every value is 0, so the families are always exported.

// LimitCounts is what the node's bounds hold and refused since start.
type LimitCounts struct {
	Groups int // consumer groups held (max.groups)
	// Refusals by bound: creations past max.partitions and max.groups, topics refused by
	// controller_mutation_rate.
	PartitionBound, MutationQuota, GroupBound uint64
}

var (
	groupsDesc      = desc("groups", "Consumer groups the node holds (--max-groups bounds them).")
	limitRefuseDesc = desc("limit_refusals_total", "Requests (topics, groups) refused by a bound on client-made state: max.partitions and max.groups (POLICY_VIOLATION), controller_mutation_rate (THROTTLING_QUOTA_EXCEEDED).", "limit")
)

// limitsCollector reads the node's LimitCounts at scrape time.
type limitsCollector struct {
	src atomic.Pointer[func() LimitCounts]
}

func (c *limitsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupsDesc
	ch <- limitRefuseDesc
}

func (c *limitsCollector) Collect(ch chan<- prometheus.Metric) {
	var lc LimitCounts
	if f := c.src.Load(); f != nil {
		lc = (*f)()
	}
	ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, float64(lc.Groups))
	for _, l := range []struct {
		name string
		n    uint64
	}{{"max.partitions", lc.PartitionBound}, {"controller_mutation_rate", lc.MutationQuota}, {"max.groups", lc.GroupBound}} {
		ch <- prometheus.MustNewConstMetric(limitRefuseDesc, prometheus.CounterValue, float64(l.n), l.name)
	}
}

// WatchLimits names the source of the bounds' counts (server.Server.LimitCounts).
func (r *Requests) WatchLimits(f func() LimitCounts) { r.limits.src.Store(&f) }
