package segments

import (
	"fmt"
	"path/filepath"
)

// Missing says why the segments do not hold the batch an index entry names at loc ("is
// indexed in FILE, which does not exist", or past the file's end), or returns "" if they do:
// the file side of the log's start-up check (the log's startcheck.go), run after Replay.
func (s *Store) Missing(loc Loc) string {
	s.mu.RLock()
	seg := s.segs[loc.Seg]
	s.mu.RUnlock()
	name := filepath.Join(s.dir, segmentName(loc.Seg))
	if seg == nil {
		return fmt.Sprintf("is indexed in %s, which does not exist", name)
	}
	if loc.Pos+int64(loc.Length) > seg.size {
		return fmt.Sprintf("is indexed in %s at %d (%d bytes), past the file's %d bytes", name, loc.Pos, loc.Length, seg.size)
	}
	return ""
}
