package loadgen

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Histogram counts latencies in microseconds in log-linear buckets, the HDR histogram layout:
// values below 256 have a bucket each; above that, every power of two is split into 128 equal
// buckets, so a bucket is at most 1/128 of its values wide and a quantile read from the bucket's
// midpoint is within 0.4% of the true sample. Values at or above MaxHistogramValue are clamped.
//
// Record is one atomic add (plus a compare-and-swap only when a new maximum appears), so the
// kgo promise goroutine that records and the once-a-second reader that snapshots never lock.
// Each producer has its own Histogram; snapshots are merged.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	max    atomic.Uint64
}

const (
	// subBucketBits sets the precision: 2^subBucketBits buckets per power of two below 256,
	// half that (the upper half) per power of two above it.
	subBucketBits = 8
	halfSubBucket = 1 << (subBucketBits - 1)

	// MaxHistogramValue is 2^36 µs, about 19 hours: far past any ack latency worth
	// distinguishing, and it keeps a histogram at 30 KiB.
	MaxHistogramValue = 1<<36 - 1
	numBuckets        = (36-subBucketBits)<<(subBucketBits-1) + 1<<subBucketBits
)

// bucketIndex maps v to its bucket. With shift = max(0, bitlen(v)-8), v>>shift keeps v's top
// eight bits, which lie in [128, 256) once shift > 0; adding shift*128 lays the powers of two
// end to end, and the first 256 values map to themselves.
func bucketIndex(v uint64) int {
	shift := bits.Len64(v) - subBucketBits
	if shift < 0 {
		shift = 0
	}
	return shift<<(subBucketBits-1) + int(v>>uint(shift))
}

// bucketRange is the inverse of bucketIndex: the lowest value in bucket i and the bucket's width.
func bucketRange(i int) (low, width uint64) {
	if i < 1<<subBucketBits {
		return uint64(i), 1
	}
	shift := i>>(subBucketBits-1) - 1
	sub := i - shift<<(subBucketBits-1)
	return uint64(sub) << uint(shift), 1 << uint(shift)
}

// Record adds one latency in microseconds.
func (h *Histogram) Record(us uint64) {
	if us > MaxHistogramValue {
		us = MaxHistogramValue
	}
	h.counts[bucketIndex(us)].Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// Snapshot copies the counts into s (overwriting it). Records that land while the copy runs may
// or may not be included; the copy is for reporting, not accounting.
func (h *Histogram) Snapshot(s *HistogramSnapshot) {
	s.Total = 0
	for i := range h.counts {
		c := h.counts[i].Load()
		s.Counts[i] = c
		s.Total += c
	}
	s.Max = h.max.Load()
}

// HistogramSnapshot is a plain copy of a Histogram that can be merged, differenced and queried.
type HistogramSnapshot struct {
	Counts [numBuckets]uint64
	Total  uint64
	// Max is the largest value recorded, exact. For a difference of two snapshots it is the
	// later snapshot's maximum, an upper bound.
	Max uint64
}

// Merge adds o's counts to s.
func (s *HistogramSnapshot) Merge(o *HistogramSnapshot) {
	for i, c := range o.Counts {
		s.Counts[i] += c
	}
	s.Total += o.Total
	s.Max = max(s.Max, o.Max)
}

// Since turns s into the counts recorded after prev was taken (s must be the later snapshot of
// the same histograms): the per-second live figures come from this.
func (s *HistogramSnapshot) Since(prev *HistogramSnapshot) {
	for i := range s.Counts {
		s.Counts[i] -= prev.Counts[i]
	}
	s.Total -= prev.Total
}

// Quantile returns the value at quantile q in [0, 1]: the smallest recorded value with at least
// ceil(q*Total) values at or below it (the nearest-rank definition), read as the midpoint of its
// bucket and never above Max; the top rank is Max itself. It returns 0 for an empty snapshot.
func (s *HistogramSnapshot) Quantile(q float64) uint64 {
	if s.Total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(s.Total)))
	rank = min(max(rank, 1), s.Total)
	if rank == s.Total {
		return s.Max // the largest value is known exactly
	}
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen >= rank {
			low, width := bucketRange(i)
			return min(low+(width-1)/2, s.Max)
		}
	}
	return s.Max // unreachable while Total equals the sum of Counts
}

// Mean returns the average of the bucket midpoints, in microseconds.
func (s *HistogramSnapshot) Mean() float64 {
	if s.Total == 0 {
		return 0
	}
	var sum float64
	for i, c := range s.Counts {
		if c != 0 {
			low, width := bucketRange(i)
			sum += float64(c) * (float64(low) + float64(width-1)/2)
		}
	}
	return sum / float64(s.Total)
}

// HistogramBucket is one non-empty bucket: Count values in [LowUs, HighUs].
type HistogramBucket struct {
	LowUs  uint64 `json:"low_us"`
	HighUs uint64 `json:"high_us"`
	Count  uint64 `json:"count"`
}

// Buckets lists the non-empty buckets in increasing order, for the JSON result: a harness can
// merge runs or draw the distribution from them.
func (s *HistogramSnapshot) Buckets() []HistogramBucket {
	var out []HistogramBucket
	for i, c := range s.Counts {
		if c != 0 {
			low, width := bucketRange(i)
			out = append(out, HistogramBucket{LowUs: low, HighUs: low + width - 1, Count: c})
		}
	}
	return out
}
