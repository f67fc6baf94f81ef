package segfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// MemFS is an in-memory FS that forgets, when it "crashes", what was not synced: a file keeps
// the data of its last Datasync, a directory the names of its last SyncDir (Crash). Direct
// writes are checked for alignment as O_DIRECT checks them. Every call can be made to fail
// (Inject), so tests reach the store's error paths: ENOSPC on a write, EIO on a read or sync.
//
// Directories are names in their parents like files: one made with Mkdir survives a crash
// only if its parent was synced since (and the parent survives), as on a file system with
// strict POSIX crash semantics; the roots "/" and "." always exist. Paths are cleaned with
// path.Clean.
type MemFS struct {
	// crashMu is held shared by every call that changes the file system and exclusively by
	// Crash, so a crash falls between calls, never inside one.
	crashMu sync.RWMutex
	mu      sync.Mutex
	dirs    map[string]*memDir
	inject  func(op Op, name string) error
	free    atomic.Int64 // FreeBytes' answer (SetFreeBytes)
}

// Op names a call for Inject.
type Op int

const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpTruncate
	OpSync
	OpRemove
	OpSyncDir
	OpMkdir
)

func (o Op) String() string {
	return [...]string{"create", "open", "read", "write", "truncate", "sync", "remove", "syncdir", "mkdir"}[o]
}

type memDir struct {
	files  map[string]*memNode // names as the running system sees them
	synced map[string]*memNode // names as of the last SyncDir
}

func newMemDir() *memDir {
	return &memDir{files: map[string]*memNode{}, synced: map[string]*memNode{}}
}

type memNode struct {
	dir    bool // a directory's name in its parent; its entries are in MemFS.dirs
	mu     sync.Mutex
	data   []byte
	synced []byte  // contents as of the last Datasync
	ops    []memOp // changes since the last Datasync, in order
}

// memOp is an unsynced change to a file: a write of data at off, or a truncate to off.
type memOp struct {
	off      int64
	data     []byte
	truncate bool
}

// NewCrashableMem returns an empty MemFS, which reports 1 TiB free.
func NewCrashableMem() *MemFS {
	m := &MemFS{dirs: map[string]*memDir{}}
	for _, root := range []string{"/", "."} {
		m.dirs[root] = newMemDir()
	}
	m.free.Store(1 << 40)
	return m
}

// SetFreeBytes sets what FreeBytes reports (writes are not limited by it: Inject fails them).
func (m *MemFS) SetFreeBytes(n int64) { m.free.Store(n) }

func (m *MemFS) FreeBytes(string) (int64, error) { return m.free.Load(), nil }

// Inject makes fn decide, before every call, whether it fails: a non-nil error is returned
// from the call, which then changes nothing, except a *ShortWrite for a write, which writes
// its first N bytes first. nil removes the hook.
func (m *MemFS) Inject(fn func(op Op, name string) error) {
	m.mu.Lock()
	m.inject = fn
	m.mu.Unlock()
}

func (m *MemFS) check(op Op, name string) error {
	m.mu.Lock()
	fn := m.inject
	m.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(op, name)
}

// ShortWrite, returned by an Inject hook for a write, makes the write keep its first N bytes
// (all of them if it has fewer) and then fail with Err: a disk that fills in the middle of it.
type ShortWrite struct {
	N   int
	Err error
}

func (e *ShortWrite) Error() string { return fmt.Sprintf("short write of %d bytes: %v", e.N, e.Err) }
func (e *ShortWrite) Unwrap() error { return e.Err }

// CrashMode says what of the unsynced changes survives a crash.
type CrashMode int

const (
	// SyncedOnly keeps exactly what was synced.
	SyncedOnly CrashMode = iota
	// TornPrefix keeps each file's unsynced changes up to a random one, and that one (a
	// write) up to a random byte: a device that writes in order and loses power mid-write.
	TornPrefix
	// RandomBlocks keeps each 4 KiB block of every unsynced write, or not, at random: a
	// device that reorders its write cache. A truncate survives or not at random.
	RandomBlocks
	// ProcessKill keeps everything, synced or not, as the page cache does when only the
	// process dies: what was not synced stays unsynced in the clone, for a later crash to
	// lose. Names not synced are kept too.
	ProcessKill
)

// Crash returns the file system a power loss at this moment could leave: every file and name
// that was synced, and of the rest what mode says, decided with rng. The MemFS itself goes on
// unchanged; the files open on it stay open on it. The clone's files hold no unsynced changes.
//
// Before it freezes the file system, Crash calls during, if set, under the same exclusion:
// tests clone Pebble's crashable vfs there, so both stores are cut at one instant.
func (m *MemFS) Crash(mode CrashMode, rng *rand.Rand, during func()) *MemFS {
	m.crashMu.Lock()
	defer m.crashMu.Unlock()
	if during != nil {
		during()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewCrashableMem()
	if mode == ProcessKill {
		for dirName, d := range m.dirs {
			nd := newMemDir()
			clones := map[*memNode]*memNode{}
			for name, n := range d.files {
				clones[n] = n.killClone()
				nd.files[name] = clones[n]
			}
			for name, n := range d.synced {
				if clones[n] == nil {
					clones[n] = n.killClone() // removed, its removal not synced
				}
				nd.synced[name] = clones[n]
			}
			out.dirs[dirName] = nd
		}
		return out
	}
	// From the roots down: a directory is there after the crash if its name was synced in a
	// parent that is there.
	var keep func(dirName string)
	keep = func(dirName string) {
		d := m.dirs[dirName]
		nd := newMemDir()
		out.dirs[dirName] = nd
		if d == nil {
			return // removed, its removal not synced: it comes back empty
		}
		for _, name := range slices.Sorted(maps.Keys(d.synced)) {
			n := d.synced[name]
			nd.files[name] = n.crashClone(mode, rng)
			if n.dir {
				keep(path.Join(dirName, name))
			}
		}
		nd.synced = maps.Clone(nd.files)
	}
	keep("/")
	keep(".")
	return out
}

func (n *memNode) crashClone(mode CrashMode, rng *rand.Rand) *memNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	data := slices.Clone(n.synced)
	switch mode {
	case TornPrefix:
		if len(n.ops) > 0 {
			k := rng.IntN(len(n.ops) + 1) // ops kept whole
			for _, op := range n.ops[:k] {
				data = op.applyTo(data, len(op.data))
			}
			if k < len(n.ops) && !n.ops[k].truncate && len(n.ops[k].data) > 0 {
				data = n.ops[k].applyTo(data, rng.IntN(len(n.ops[k].data)))
			}
		}
	case RandomBlocks:
		for _, op := range n.ops {
			if op.truncate {
				if rng.IntN(2) == 0 {
					data = op.applyTo(data, 0)
				}
				continue
			}
			for i := 0; i < len(op.data); i += BlockSize {
				if rng.IntN(2) == 0 {
					blk := memOp{off: op.off + int64(i), data: op.data[i:min(i+BlockSize, len(op.data))]}
					data = blk.applyTo(data, len(blk.data))
				}
			}
		}
	}
	return &memNode{dir: n.dir, data: data, synced: slices.Clone(data)}
}

// killClone copies n as a process kill leaves it: its data whole, its synced state and
// unsynced changes as they were.
func (n *memNode) killClone() *memNode {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := &memNode{dir: n.dir, data: slices.Clone(n.data), synced: slices.Clone(n.synced)}
	for _, op := range n.ops {
		c.ops = append(c.ops, memOp{off: op.off, data: slices.Clone(op.data), truncate: op.truncate})
	}
	return c
}

// applyTo applies the first n bytes of a write (or a truncate) to data.
func (op memOp) applyTo(data []byte, n int) []byte {
	if op.truncate {
		if op.off <= int64(len(data)) {
			return data[:op.off]
		}
		return append(data, make([]byte, op.off-int64(len(data)))...)
	}
	end := op.off + int64(n)
	if end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[op.off:end], op.data[:n])
	return data
}

// Files returns a copy of every file's current contents by path: what a test compares before
// and after a start-up that must change nothing.
func (m *MemFS) Files() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for dirName, d := range m.dirs {
		for name, n := range d.files {
			if n.dir {
				continue
			}
			n.mu.Lock()
			out[path.Join(dirName, name)] = slices.Clone(n.data)
			n.mu.Unlock()
		}
	}
	return out
}

// Corrupt flips the bits of mask in the byte at off of name, in what is synced too: a
// fault of the medium, not a write.
func (m *MemFS) Corrupt(name string, off int64, mask byte) error {
	n, err := m.node(name)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if off >= int64(len(n.data)) {
		return fmt.Errorf("segfs: corrupt %s at %d: past its end %d", name, off, len(n.data))
	}
	n.data[off] ^= mask
	if off < int64(len(n.synced)) {
		n.synced[off] ^= mask
	}
	return nil
}

func (m *MemFS) node(name string) (*memNode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, name := m.dirOf(name)
	if d == nil || d.files[base] == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if d.files[base].dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return d.files[base], nil
}

// dirOf returns name cleaned, its directory (nil if it was never made) and its base name.
// Callers hold m.mu.
func (m *MemFS) dirOf(name string) (d *memDir, base, clean string) {
	clean = path.Clean(name)
	dir, base := path.Split(clean)
	return m.dirs[path.Clean(dir)], base, clean
}

func (m *MemFS) Mkdir(dir string) error {
	m.crashMu.RLock()
	defer m.crashMu.RUnlock()
	if err := m.check(OpMkdir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, dir := m.dirOf(dir)
	if m.dirs[dir] != nil || parent != nil && parent.files[base] != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
	}
	if parent == nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrNotExist}
	}
	parent.files[base] = &memNode{dir: true}
	m.dirs[dir] = newMemDir()
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirs[path.Clean(dir)]
	if d == nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	names := slices.Collect(maps.Keys(d.files))
	sort.Strings(names)
	return names, nil
}

func (m *MemFS) Create(name string) (File, error) {
	m.crashMu.RLock()
	defer m.crashMu.RUnlock()
	if err := m.check(OpCreate, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, name := m.dirOf(name)
	if d == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if d.files[base] != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	n := &memNode{}
	d.files[base] = n
	return &memFile{fs: m, n: n, name: name}, nil
}

func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

func (m *MemFS) OpenDirect(name string) (File, error) { return m.open(name, true) }

func (m *MemFS) open(name string, direct bool) (File, error) {
	if err := m.check(OpOpen, name); err != nil {
		return nil, err
	}
	n, err := m.node(name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, n: n, name: path.Clean(name), direct: direct}, nil
}

func (m *MemFS) Remove(name string) error {
	m.crashMu.RLock()
	defer m.crashMu.RUnlock()
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, name := m.dirOf(name)
	if d == nil || d.files[base] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if d.files[base].dir {
		if len(m.dirs[name].files) > 0 {
			return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
		}
		delete(m.dirs, name)
	}
	delete(d.files, base)
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.crashMu.RLock()
	defer m.crashMu.RUnlock()
	if err := m.check(OpSyncDir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirs[path.Clean(dir)]
	if d == nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: fs.ErrNotExist}
	}
	d.synced = maps.Clone(d.files)
	return nil
}

type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	direct bool
	closed bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Close() error {
	if f.closed {
		return fmt.Errorf("segfs: close of closed file %s", f.name)
	}
	f.closed = true
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	if f.direct {
		return 0, fmt.Errorf("segfs: read of %s through its direct writer", f.name)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteV(iov [][]byte, off int64) (int64, error) {
	f.fs.crashMu.RLock()
	defer f.fs.crashMu.RUnlock()
	injected := f.fs.check(OpWrite, f.name)
	var short *ShortWrite
	if injected != nil && !errors.As(injected, &short) {
		return off, injected
	}
	var data []byte
	for _, b := range iov {
		if f.direct && len(b)%BlockSize != 0 {
			return off, fmt.Errorf("segfs: direct write of %d bytes to %s: not whole blocks", len(b), f.name)
		}
		data = append(data, b...)
	}
	if f.direct && off%BlockSize != 0 {
		return off, fmt.Errorf("segfs: direct write to %s at %d: not block-aligned", f.name, off)
	}
	if short != nil {
		if f.direct {
			// O_DIRECT transfers whole blocks: a short one ends on a boundary.
			short.N -= short.N % BlockSize
		}
		data = data[:min(max(short.N, 0), len(data))]
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	op := memOp{off: off, data: data}
	f.n.data = op.applyTo(f.n.data, len(data))
	f.n.ops = append(f.n.ops, op)
	if short != nil {
		return off + int64(len(data)), short.Err
	}
	return off + int64(len(data)), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.crashMu.RLock()
	defer f.fs.crashMu.RUnlock()
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	op := memOp{off: size, truncate: true}
	f.n.data = op.applyTo(f.n.data, 0)
	f.n.ops = append(f.n.ops, op)
	return nil
}

func (f *memFile) Datasync() error {
	f.fs.crashMu.RLock()
	defer f.fs.crashMu.RUnlock()
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.synced = append(f.n.synced[:0], f.n.data...)
	f.n.ops = f.n.ops[:0]
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	return int64(len(f.n.data)), nil
}
