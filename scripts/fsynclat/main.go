// Command fsynclat times O_DIRECT writes of 64 KiB and the fdatasync after each, in a file on
// the file system of DIR, in three ways: appending (each write extends the file, so each
// fdatasync commits the file system's journal), overwriting a file written with zeros and
// synced first (the fdatasync only flushes the device's cache), and appending with RWF_DSYNC
// (the write and the sync in one call). It prints p50, p99 and p99.9 of each, per mode,
// ROUNDS times alternating. It is a module of its own, a measurement aid only.
//
//	cd scripts/fsynclat && go run . DIR [ROUNDS]
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	writeSize = 64 << 10
	writes    = 3000
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fsynclat DIR [ROUNDS]")
		os.Exit(2)
	}
	rounds := 2
	if len(os.Args) > 2 {
		rounds, _ = strconv.Atoi(os.Args[2])
	}
	path := filepath.Join(os.Args[1], "fsynclat.dat")
	for r := 1; r <= rounds; r++ {
		for _, mode := range []string{"append", "zeroed", "append-dsync"} {
			w, s, err := run(path, mode)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fsynclat:", err)
				os.Exit(1)
			}
			fmt.Printf("round %d %-13s write p50 %7s p99 %7s | fdatasync p50 %7s p99 %7s p99.9 %7s\n", r, mode,
				q(w, .5), q(w, .99), q(s, .5), q(s, .99), q(s, .999))
		}
	}
}

func run(path, mode string) (w, s []time.Duration, err error) {
	os.Remove(path)
	defer os.Remove(path)
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	if mode == "zeroed" {
		z := aligned(4 << 20)
		for off := 0; off < writeSize*writes; off += len(z) {
			if _, err := unix.Pwrite(fd, z, int64(off)); err != nil {
				return nil, nil, err
			}
		}
		if err := unix.Fdatasync(fd); err != nil {
			return nil, nil, err
		}
	}
	buf := aligned(writeSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	for i := range writes {
		t0 := time.Now()
		if mode == "append-dsync" {
			_, err = unix.Pwritev2(fd, [][]byte{buf}, int64(i*writeSize), unix.RWF_DSYNC)
		} else {
			_, err = unix.Pwrite(fd, buf, int64(i*writeSize))
		}
		if err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		if mode != "append-dsync" {
			if err := unix.Fdatasync(fd); err != nil {
				return nil, nil, err
			}
		}
		w, s = append(w, t1.Sub(t0)), append(s, time.Since(t1))
	}
	return w, s, nil
}

func aligned(n int) []byte {
	b := make([]byte, n+4096)
	off := int(uintptr(unsafe.Pointer(&b[0])) & 4095)
	if off != 0 {
		off = 4096 - off
	}
	return b[off : off+n]
}

func q(d []time.Duration, p float64) string {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[int(float64(len(d)-1)*p)].Round(time.Microsecond).String()
}
