// Package limittest checks, over real loopback TCP with raw HTTP/1.1, that a server applies
// httplimit.Limits: the tests of httplimit, registry and metrics share it. Each check is
// bounded in time and closes every connection it opens.
package limittest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// slack is what the checks allow beyond a timeout, for a loaded 2-core machine under -race.
const slack = 3 * time.Second

// dial opens a connection to addr that the test closes when it ends.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends GET path on c (kept alive) and reads the whole response within timeout.
func get(c net.Conn, br *bufio.Reader, path string, timeout time.Duration) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: inlet\r\n\r\n", path); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedWithin reads c until the server closes it, and returns how long that took; it fails
// the test if c is still open after limit.
func closedWithin(t testing.TB, c net.Conn, br *bufio.Reader, limit time.Duration, what string) time.Duration {
	t.Helper()
	began := time.Now()
	_ = c.SetReadDeadline(began.Add(limit))
	_, err := io.Copy(io.Discard, br)
	took := time.Since(began)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the connection is still open after %v", what, limit)
	}
	return took // EOF (err nil) or a reset: closed by the server
}

// IdleIsClosed: a kept-alive connection that sends nothing after a request is closed after
// idle (the server's IdleTimeout), not before half of it.
func IdleIsClosed(t testing.TB, addr, path string, idle time.Duration) {
	t.Helper()
	c := dial(t, addr)
	br := bufio.NewReader(c)
	if _, err := get(c, br, path, 5*time.Second); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if took := closedWithin(t, c, br, idle+slack, "idle after a request"); took < idle/2 {
		t.Fatalf("idle after a request: closed after %v, before the idle timeout of %v", took, idle)
	}
}

// SlowBodyIsCut: a POST whose body stops arriving (10 of 1,000 declared bytes) is cut after
// read (the server's ReadTimeout): the connection is closed, whatever the handler answered.
func SlowBodyIsCut(t testing.TB, addr, path string, read time.Duration) {
	t.Helper()
	c := dial(t, addr)
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: inlet\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"schema\":", path); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	closedWithin(t, c, bufio.NewReader(c), read+slack, "a body that stops arriving")
}

// ConnsPastTheCapWait: with max connections served (each kept alive after a request), one
// more connection is accepted by the kernel but not served; once one of them closes, it is.
func ConnsPastTheCapWait(t testing.TB, addr, path string, max int) {
	t.Helper()
	var held []net.Conn
	for i := range max {
		c := dial(t, addr)
		if _, err := get(c, bufio.NewReader(c), path, 5*time.Second); err != nil {
			t.Fatalf("connection %d of %d: GET %s: %v", i+1, max, path, err)
		}
		held = append(held, c)
	}
	c := dial(t, addr)
	br := bufio.NewReader(c)
	if resp, err := get(c, br, path, 500*time.Millisecond); err == nil {
		t.Fatalf("connection %d past a cap of %d was served: %s", max+1, max, resp.Status)
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection %d past a cap of %d: %v, want it to wait", max+1, max, err)
	}
	held[0].Close()
	// The request was written already; its response comes once the connection is accepted.
	_ = c.SetDeadline(time.Now().Add(slack))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("connection %d, after one of the %d served closed: %v", max+1, max, err)
	}
	resp.Body.Close()
}
