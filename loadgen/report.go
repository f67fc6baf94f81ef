package loadgen

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"
)

// writeLive prints one line a second until done: elapsed time, then for the last second the
// acked records/s, MB/s of values and ack latency p50/p99, then the error total.
func writeLive(w io.Writer, recordSize int, start time.Time, producers []*producer, done <-chan struct{}) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	// The snapshots are 30 KiB each; three live for the whole run.
	prev, cur, one := new(HistogramSnapshot), new(HistogramSnapshot), new(HistogramSnapshot)
	var prevAcked uint64
	prevAt := time.Duration(0)
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
		}
		at := time.Since(start)
		*cur = HistogramSnapshot{}
		var acked, failed uint64
		for _, p := range producers {
			acked += p.acked.Load()
			failed += p.failed.Load()
			p.latency.Snapshot(one)
			cur.Merge(one)
		}
		interval := *cur
		interval.Since(prev)
		fmt.Fprintln(w, liveLine(at, at-prevAt, acked-prevAcked, recordSize, &interval, failed))
		*prev, prevAcked, prevAt = *cur, acked, at
	}
}

func liveLine(at, span time.Duration, acked uint64, recordSize int, interval *HistogramSnapshot, errors uint64) string {
	rate := float64(acked) / span.Seconds()
	return fmt.Sprintf("%7.1fs %12s rec/s %9.1f MB/s   p50 %8s   p99 %8s   errors %d",
		at.Seconds(), thousands(uint64(rate)), rate*float64(recordSize)/1e6,
		formatMicros(interval.Quantile(0.50)), formatMicros(interval.Quantile(0.99)), errors)
}

// WriteSummary prints the outcome of a run.
func (r *Result) WriteSummary(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("topic       %q, %d partitions (%s)\n", r.Settings.Topic, r.Settings.Partitions, r.Topic)
	ew.printf("records     sent %s, acked %s, failed %s", thousands(r.Sent), thousands(r.Acked), thousands(r.Failed))
	if r.Unresolved > 0 {
		ew.printf(", unresolved %s", thousands(r.Unresolved))
	}
	ew.printf("\nelapsed     %v (sending %v)\n", r.Elapsed.Round(time.Millisecond), r.SendElapsed.Round(time.Millisecond))
	ew.printf("throughput  %s records/s, %.1f MB/s of values\n", thousands(uint64(r.RecordsPerSec)), r.MBPerSec)
	l := r.Latency
	ew.printf("ack latency p50 %s, p99 %s, p99.9 %s, max %s (mean %s, %s acks)\n",
		formatMicros(l.P50Us), formatMicros(l.P99Us), formatMicros(l.P999Us), formatMicros(l.MaxUs),
		formatMicros(uint64(l.MeanUs)), thousands(l.Count))
	if r.Settings.Rate == 0 {
		ew.printf("            flat out: latency includes time queued in the client buffer; use a rate to measure it\n")
	}
	if rt := r.RequestRoundTrip; rt.Count > 0 {
		ew.printf("request     round trip p50 %s, p99 %s, p99.9 %s, max %s (%s produce requests, write to response)\n",
			formatMicros(rt.P50Us), formatMicros(rt.P99Us), formatMicros(rt.P999Us), formatMicros(rt.MaxUs), thousands(rt.Count))
	}
	ew.printf("errors      %s\n", thousands(r.Failed))
	for _, e := range sortedErrors(r.Errors) {
		ew.printf("  %12s  %s\n", thousands(e.n), e.text)
	}
	if t := r.Transactions; t != nil {
		ew.printf("transactions committed %s (%s records), aborted %s (%s records; %s chosen by the abort fraction, %s after an error), "+
			"in doubt %s (%s records); ids %s\n",
			thousands(t.Committed), thousands(t.CommittedRecords), thousands(t.Aborted), thousands(t.AbortedRecords),
			thousands(t.AbortedChosen), thousands(t.Aborted-t.AbortedChosen), thousands(t.InDoubt), thousands(t.InDoubtRecords),
			r.Settings.TransactionalIDs)
		if t.ClientsRecreated > 0 || len(t.Errors) > 0 {
			ew.printf("  clients recreated %s; transaction errors:\n", thousands(t.ClientsRecreated))
			for _, e := range sortedErrors(t.Errors) {
				ew.printf("  %12s  %s\n", thousands(e.n), e.text)
			}
		}
		for _, p := range r.Producers {
			if p.TxnBroken {
				ew.printf("  producer %d (%s) stopped early: it could not end or begin a transaction\n", p.Producer, p.TransactionalID)
			}
		}
	}
	if r.FlushTimedOut {
		ew.printf("flush       timed out after %v: the clients were closed with acks outstanding\n", r.Settings.FlushTimeout)
	}
	if r.Interrupted {
		ew.printf("interrupted before the end; not verified\n")
	}
	if v := r.Verify; v != nil {
		ew.printf("%s\n", v.Verdict())
		ew.printf("  read %s records from %d partitions in %v: acked %s, found %s, lost %s, duplicates %s, "+
			"out of order %s, unacked but present %s, malformed %s, unknown %s\n",
			thousands(v.Read), len(v.Ranges), v.Duration.Round(time.Millisecond), thousands(v.Acked),
			thousands(v.Found), thousands(v.Lost), thousands(v.Duplicates), thousands(v.OutOfOrder),
			thousands(v.UnackedPresent), thousands(v.Malformed), thousands(v.Unknown))
		if t := v.Txn; t != nil {
			ew.printf("  transactions: committed %s (%s records, each read once: lost %s, duplicates %s), "+
				"aborted %s (%s records, read %s), in doubt %s (%s records: %s read whole, %s not read, %s partial)\n",
				thousands(t.Committed), thousands(t.CommittedRecords), thousands(v.Lost), thousands(v.Duplicates),
				thousands(t.Aborted), thousands(t.AbortedRecords), thousands(t.AbortedVisible),
				thousands(t.InDoubt), thousands(t.InDoubtRecords), thousands(t.InDoubtCommitted), thousands(t.InDoubtAborted),
				thousands(t.Partial))
		}
		if v.Error != "" {
			ew.printf("  error: %s\n", v.Error)
		}
		for _, m := range v.Mismatches {
			ew.printf("  %s\n", m)
		}
	}
	return ew.err
}

type errorCount struct {
	text string
	n    uint64
}

func sortedErrors(m map[string]uint64) []errorCount {
	out := make([]errorCount, 0, len(m))
	for text, n := range m {
		out = append(out, errorCount{text, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].text < out[j].text
	})
	return out
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// formatMicros prints a latency with three significant digits in µs, ms or s.
func formatMicros(us uint64) string {
	switch {
	case us < 1000:
		return strconv.FormatUint(us, 10) + "µs"
	case us < 1_000_000:
		return strconv.FormatFloat(float64(us)/1e3, 'f', 2, 64) + "ms"
	default:
		return strconv.FormatFloat(float64(us)/1e6, 'f', 2, 64) + "s"
	}
}

// thousands prints n with commas between groups of three digits.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
