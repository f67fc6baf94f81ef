// Package segfs is the file system under the log's segment files: the few calls the segment
// store makes (mkdir, create, open for direct writes, pwritev, pread, fdatasync, truncate,
// remove, a directory sync), on the operating system (OS) or in memory with the semantics of a
// power loss (NewCrashableMem), so that tests can crash the log and keep only what it synced.
//
// The segment store reaches the disk through nothing else; Pebble, which holds the index and
// metadata, has its own (pebble's vfs.FS). MkdirAllSynced is the one way Inlet makes a
// directory, on either.
package segfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FS is what the segment store needs of a file system.
type FS interface {
	Dirs
	// List returns the names (not paths) in dir.
	List(dir string) ([]string, error)
	// Create creates name, which must not exist yet, for reading and writing. The new name
	// is durable only after SyncDir of its directory.
	Create(name string) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	// OpenDirect opens an existing file for writes that bypass the page cache (O_DIRECT):
	// every write's offset and length must be multiples of BlockSize, and its buffers start
	// on a block boundary. It returns ErrDirectRefused where the file system refuses.
	OpenDirect(name string) (File, error)
	// Remove unlinks name; the removal is durable only after SyncDir of its directory.
	Remove(name string) error
	// FreeBytes is the space left on dir's file system for an unprivileged writer.
	FreeBytes(dir string) (int64, error)
}

// Dirs is what MkdirAllSynced needs of a file system.
type Dirs interface {
	// Mkdir makes one directory. It answers an error matching fs.ErrExist where something
	// exists by that name, and one matching fs.ErrNotExist where the parent does not exist.
	// The new name is durable only after SyncDir of its parent.
	Mkdir(dir string) error
	// SyncDir makes dir's entries durable: names created and removed in it.
	SyncDir(dir string) error
}

// MkdirAllSynced makes dir and every missing parent, and makes them durable: it syncs the
// parent of each directory it made, and the parent of dir even where dir existed (a start-up
// after a process that made it and died before that sync would otherwise build on an entry
// the disk may not have). Nothing made inside dir can survive a power loss unless dir's own
// entry does, so every directory Inlet writes into is made through here (Pebble syncs its own
// directory's parents the same way when it creates it).
func MkdirAllSynced(fsys Dirs, dir string) error {
	dir = filepath.Clean(dir)
	made, err := mkdirChain(fsys, dir)
	if err != nil {
		return err
	}
	if len(made) == 0 {
		made = []string{dir} // existed: its entry in its parent is synced all the same
	}
	for _, d := range made {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("segfs: sync %s after making %s: %w", filepath.Dir(d), d, err)
		}
	}
	return nil
}

// mkdirChain makes dir and its missing parents, and returns those it made, outermost first.
func mkdirChain(fsys Dirs, dir string) ([]string, error) {
	err := fsys.Mkdir(dir)
	switch {
	case err == nil:
		return []string{dir}, nil
	case errors.Is(err, fs.ErrExist):
		return nil, nil
	case !errors.Is(err, fs.ErrNotExist) || filepath.Dir(dir) == dir:
		return nil, err
	}
	made, err := mkdirChain(fsys, filepath.Dir(dir))
	if err != nil {
		return nil, err
	}
	if err := fsys.Mkdir(dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return append(made, dir), nil
}

// File is an open segment file.
type File interface {
	io.ReaderAt
	// WriteV writes the buffers of iov one after the other at off, whole (a short write is
	// continued), and returns the offset where the write ended. It may modify iov's slices.
	WriteV(iov [][]byte, off int64) (int64, error)
	Truncate(size int64) error
	// Datasync makes everything written to the file durable (fdatasync).
	Datasync() error
	Size() (int64, error)
	Name() string
	Close() error
}

// BlockSize is the alignment of direct writes.
const BlockSize = 4096

// AlignedBuffer returns n bytes starting on a block boundary, as O_DIRECT requires.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+BlockSize)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & (BlockSize - 1)); r != 0 {
		off = BlockSize - r
	}
	return b[off : off+n : off+n]
}

// ErrDirectRefused is OpenDirect's answer where the file system does not take O_DIRECT
// (tmpfs, some overlay mounts).
var ErrDirectRefused = errors.New("segfs: direct I/O refused")

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (osFS) Mkdir(dir string) error { return os.Mkdir(dir, 0o755) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenDirect(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		return nil, ErrDirectRefused
	}
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// OpenReadDirect opens an existing file for reads that bypass the page cache (O_DIRECT): every
// read's offset and length must be multiples of BlockSize, and its buffer start on a block
// boundary. It returns ErrDirectRefused where the file system refuses. (An optional method: the
// segment store reads through Open's file where an FS lacks it.)
func (osFS) OpenReadDirect(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		return nil, ErrDirectRefused
	}
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (osFS) FreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

func (f osFile) WriteV(iov [][]byte, off int64) (int64, error) {
	return pwritevAll(int(f.Fd()), iov, off)
}

func (f osFile) Datasync() error { return unix.Fdatasync(int(f.Fd())) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// iovMax is IOV_MAX on Linux.
const iovMax = 1024

// pwritevAll writes iov at off with as many pwritev calls as it takes (IOV_MAX iovecs each,
// short writes continued) and returns where the write ended. It consumes iov's slices.
func pwritevAll(fd int, iov [][]byte, off int64) (int64, error) {
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov[:min(len(iov), iovMax)], off)
		if err != nil {
			return off, err
		}
		off += int64(n)
		// Drop fully written iovecs; a short write continues inside the next one.
		for n > 0 && len(iov) > 0 {
			if n >= len(iov[0]) {
				n -= len(iov[0])
				iov = iov[1:]
				continue
			}
			iov[0] = iov[0][n:]
			n = 0
		}
	}
	return off, nil
}
