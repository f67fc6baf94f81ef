package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestKcatRoundTrip guards compatibility with the Debian kcat binary (its own librdkafka
// build, legacy simple consumer): lines produced with -P come back byte for byte with -C.
func TestKcatRoundTrip(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not on PATH (Debian package kcat; CI installs it)")
	}
	b := startBroker(t, nil)
	const topic = "kcat"
	b.createTopic(topic, 2)

	var in bytes.Buffer
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&in, "line %d %s\n", i, strings.Repeat("x", i%17))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prod := exec.CommandContext(ctx, kcat, "-P", "-b", b.addr, "-t", topic, "-p", "0")
	prod.Stdin = bytes.NewReader(in.Bytes())
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	if hw := b.highWatermark(topic, 0); hw != 200 {
		t.Fatalf("high watermark after kcat -P is %d, want 200", hw)
	}

	cons := exec.CommandContext(ctx, kcat, "-C", "-b", b.addr, "-t", topic, "-p", "0", "-e", "-f", `%s\n`)
	var stdout, stderr bytes.Buffer
	cons.Stdout, cons.Stderr = &stdout, &stderr
	if err := cons.Run(); err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, stderr.Bytes())
	}
	if !bytes.Equal(stdout.Bytes(), in.Bytes()) {
		t.Fatalf("kcat -C returned %d bytes, want the %d produced:\n%q", stdout.Len(), in.Len(), trunc(stdout.Bytes()))
	}
}
