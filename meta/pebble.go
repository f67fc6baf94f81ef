package meta

import (
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure Open. They are the record log's (batchlog.Options of the same names):
// the log's index and record batches are most of what the database holds.
type Options struct {
	Dir string
	// MemTableSize is Pebble's memtable size (the log's group commits must stay below half);
	// 0 means the default, 64 MiB.
	MemTableSize uint64
	// FS is Pebble's file system (default the operating system's); tests crash a
	// vfs.NewCrashableMem under it.
	FS     vfs.FS
	Logger *slog.Logger
}

// Open opens (or creates) the Pebble database in o.Dir and the catalog in it. Close closes the
// database.
func Open(o Options) (*Store, error) {
	if o.MemTableSize == 0 {
		o.MemTableSize = defaultMemTableSize
	}
	s := &Store{log: o.Logger, memTableSize: o.MemTableSize}
	if s.log == nil {
		s.log = slog.Default()
	}
	db, err := pebble.Open(o.Dir, pebbleOptions(o, &s.stalls))
	if err != nil {
		return nil, fmt.Errorf("meta: open %s: %w", o.Dir, err)
	}
	s.db = db
	if err := s.load(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

const defaultMemTableSize = 64 << 20

func pebbleOptions(opts Options, stalls *writeStalls) *pebble.Options {
	o := &pebble.Options{
		MemTableSize:                opts.MemTableSize,
		MemTableStopWritesThreshold: 4,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      quietLogger{},
		EventListener:               stalls.listener(),
		FS:                          opts.FS,
	}
	// Record data is already compressed (or deliberately not) by producers; keep it out of
	// Pebble's compressors. Value separation moves record batches into blob files at flush,
	// so compactions, which interleaved partitions make unavoidable, rewrite only keys and
	// blob references instead of the data itself.
	o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           256,
			MaxBlobReferenceDepth: 64,
			RewriteMinimumAge:     0,
			TargetGarbageRatio:    1.0,
		}
	}
	o.EnsureDefaults()
	o.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	return o
}

// quietLogger keeps Pebble's informational chatter out of Inlet's logs; errors still surface
// through returned errors and Fatalf.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})      {}
func (quietLogger) Errorf(f string, a ...interface{}) { slog.Error(fmt.Sprintf("pebble: "+f, a...)) }
func (quietLogger) Fatalf(f string, a ...interface{}) {
	slog.Error(fmt.Sprintf("pebble: "+f, a...))
	os.Exit(1)
}

// WriteStalls counts the times Pebble delayed writes since Open, and their total duration, a
// stall under way included (the log's Stats).
func (s *Store) WriteStalls() (int64, time.Duration) { return s.stalls.read() }

// writeStalls counts Pebble's write stalls through its event listener, which Pebble calls
// when a stall begins and ends (never two at once).
type writeStalls struct {
	count atomic.Int64
	nanos atomic.Int64 // total duration of the stalls that have ended
	began atomic.Int64 // unix nanoseconds when the stall under way began; 0: none
}

func (w *writeStalls) listener() *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: func(pebble.WriteStallBeginInfo) {
			w.count.Add(1)
			w.began.Store(time.Now().UnixNano())
		},
		WriteStallEnd: func() {
			if b := w.began.Swap(0); b != 0 {
				w.nanos.Add(time.Now().UnixNano() - b)
			}
		},
	}
}

func (w *writeStalls) read() (int64, time.Duration) {
	d := w.nanos.Load()
	if b := w.began.Load(); b != 0 {
		d += max(time.Now().UnixNano()-b, 0)
	}
	return w.count.Load(), time.Duration(d)
}
