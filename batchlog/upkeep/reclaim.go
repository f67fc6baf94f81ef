package upkeep

import "inlet/batchlog"

// The reclaim of segment files, after retention and compaction: segment files are shared by
// every partition, so space follows retention only once no live batch is left in a file. The
// pass sets the cost rule; which files can go and which batches pin them is the segment
// store's knowledge (batchlog's reclaim.go), which copies those batches forward through the
// committer and deletes the files.
//
// The rule: a pass copies at most 1/relocateRatio of the bytes of the files it deletes (write
// amplification at most 1/8 per reclaimed byte), and at most relocateMaxBytes. So a firehose
// whose retention expires its own data frees space at the rate it writes, while a segment
// still full of live data (a slow consumer's topic with long retention is data that retention
// keeps) is never copied.
const (
	relocateMaxBytes = 256 << 20
	relocateRatio    = 8
)

// reclaim deletes the segment files the rule allows (inside RunPass).
func (u *Upkeep) reclaim(ps *batchlog.Pass) error {
	n, err := ps.ReclaimSegments(batchlog.ReclaimPolicy{MaxCopyBytes: relocateMaxBytes, CopyRatio: relocateRatio, NoCopy: u.hooks.noRelocate})
	if n > 0 {
		u.logger.Info("batchlog: reclaimed segment files", "count", n)
	}
	return err
}
