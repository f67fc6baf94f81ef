package docs

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readmeAddr is the address the README's quickstart uses; the test puts a free port in its
// place.
const readmeAddr = "127.0.0.1:9092"

// block is one fenced code block of the quickstart: its info string (sh, text, properties,
// go) and its text.
type block struct {
	lang, text string
}

// quickstartBlocks returns the fenced blocks between the README's quickstart markers.
func quickstartBlocks(t *testing.T, readme string) []block {
	t.Helper()
	begin := strings.Index(readme, "<!-- quickstart:begin")
	end := strings.Index(readme, "<!-- quickstart:end -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no quickstart:begin/quickstart:end markers")
	}
	var out []block
	var cur *block
	for _, l := range strings.Split(readme[begin:end], "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		case cur != nil && strings.HasPrefix(l, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	if cur != nil {
		t.Fatal("README's quickstart has an unclosed code block")
	}
	return out
}

// lookKcat finds kcat as the repository's other tests do: with CI=true a missing tool fails
// the test (scripts/setup.sh installs it), elsewhere the kcat steps are skipped.
func lookKcat(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("kcat"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("kcat is not installed: make test installs it (scripts/setup.sh)")
	}
	return ""
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestREADMEQuickstart runs the README's quickstart, block by block, against a fresh node on
// a free port: the shell commands as written (make build is the test's own go build of
// cmd/inlet into bin/ of a fresh directory, where bin/inlet then runs), the output block
// after a command as what it must print (in any order: the topic has 16 partitions), and the
// client properties through franz-go, a producer and a consumer group reading what kcat
// wrote. A property the test cannot map to franz-go fails it, so the README cannot show
// settings nobody ran. Finally the node must drain and exit 0 on SIGINT, as the README says
// Ctrl-C does.
func TestREADMEQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and real clients")
	}
	root := Root(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := quickstartBlocks(t, string(b))
	if len(blocks) < 4 {
		t.Fatalf("README's quickstart has %d code blocks", len(blocks))
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	kcat := lookKcat(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		node                      *exec.Cmd
		nodeLog                   bytes.Buffer
		nodeDone                  = make(chan error, 1)
		built, started, kcatRan   bool
		lastOut                   string
		lastCmd                   string
		producerProps, groupProps map[string]string
		topic                     string
		goBlock                   string
	)
	t.Cleanup(func() {
		if node != nil && node.ProcessState == nil {
			node.Process.Kill()
			<-nodeDone
		}
		if t.Failed() {
			t.Logf("node log:\n%s", nodeLog.String())
		}
	})
	for _, blk := range blocks {
		switch blk.lang {
		case "sh":
			for _, line := range strings.Split(blk.text, "\n") {
				cmd := strings.TrimSpace(line)
				if i := strings.Index(cmd, " #"); i >= 0 {
					cmd = strings.TrimSpace(cmd[:i])
				}
				if cmd == "" || strings.HasPrefix(cmd, "#") {
					continue
				}
				cmd = strings.ReplaceAll(cmd, readmeAddr, addr)
				switch {
				case cmd == "make build":
					// The Makefile's build target writes bin/inlet; build the same package into
					// this directory's bin/ so that bin/inlet below is the node under test.
					out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "bin", "inlet"), "inlet/cmd/inlet").CombinedOutput()
					if err != nil {
						t.Fatalf("go build inlet/cmd/inlet: %v\n%s", err, out)
					}
					built = true
				case strings.HasPrefix(cmd, "bin/inlet "):
					if !built {
						t.Fatalf("README starts %q before make build", cmd)
					}
					args := strings.Fields(cmd)[1:]
					if !slices.Contains(args, "--listen") {
						args = append(args, "--listen", addr) // the README relies on the default address
					}
					node = exec.Command(filepath.Join(dir, "bin", "inlet"), args...)
					node.Dir = dir
					node.Stdout, node.Stderr = &nodeLog, &nodeLog
					if err := node.Start(); err != nil {
						t.Fatal(err)
					}
					go func() { nodeDone <- node.Wait() }()
					waitListening(t, addr, nodeDone)
					started = true
				default:
					if !started {
						t.Fatalf("README runs %q before starting a node", cmd)
					}
					if strings.Contains(cmd, "kcat ") {
						if kcat == "" {
							t.Logf("kcat is not installed; skipping %q", cmd)
							lastCmd, lastOut = "", ""
							continue
						}
						kcatRan = true
						if m := regexp.MustCompile(`-t (\S+)`).FindStringSubmatch(cmd); m != nil {
							if topic != "" && topic != m[1] {
								t.Fatalf("README's quickstart uses two topics, %s and %s", topic, m[1])
							}
							topic = m[1]
						}
					}
					c := exec.CommandContext(ctx, "sh", "-c", cmd)
					c.Dir = dir
					var stdout, stderr bytes.Buffer
					c.Stdout, c.Stderr = &stdout, &stderr
					if err := c.Run(); err != nil {
						t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
					}
					lastCmd, lastOut = cmd, stdout.String()
				}
			}
		case "text":
			if lastCmd == "" {
				if kcat == "" {
					continue // its command was skipped with kcat
				}
				t.Fatalf("README shows output %q after no command", blk.text)
			}
			if got, want := sortedLines(lastOut), sortedLines(blk.text); !slices.Equal(got, want) {
				t.Errorf("%s printed %q, README shows %q", lastCmd, lastOut, blk.text)
			}
		case "properties":
			props := parseProperties(t, blk.text)
			if _, ok := props["group.id"]; ok {
				groupProps = props
			} else {
				producerProps = props
			}
		case "go":
			goBlock = blk.text
		default:
			t.Fatalf("README's quickstart has a %q block, which this test does not run", blk.lang)
		}
	}
	if !started || producerProps == nil || groupProps == nil || goBlock == "" {
		t.Fatalf("README's quickstart lacks a step: node started %v, producer properties %v, consumer properties %v, franz-go block %v",
			started, producerProps != nil, groupProps != nil, goBlock != "")
	}
	if topic == "" {
		topic = "quickstart" // kcat was skipped: the franz-go block names it
	}

	// The franz-go block must say what the properties say.
	goArgs := func(fn string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`kgo\.`+fn+`\("([^"]*)"\)`).FindAllStringSubmatch(goBlock, -1) {
			out = append(out, m[1])
		}
		return out
	}
	for _, seed := range goArgs("SeedBrokers") {
		if seed != producerProps["bootstrap.servers"] || seed != groupProps["bootstrap.servers"] {
			t.Errorf("franz-go's SeedBrokers(%q) is not the properties' bootstrap.servers", seed)
		}
	}
	if g := goArgs("ConsumerGroup"); len(g) != 1 || g[0] != groupProps["group.id"] {
		t.Errorf("franz-go's ConsumerGroup %q, the properties' group.id %q", g, groupProps["group.id"])
	}
	if tp := goArgs("ConsumeTopics"); len(tp) != 1 || tp[0] != topic {
		t.Errorf("franz-go's ConsumeTopics %q, the kcat commands' topic %q", tp, topic)
	}

	// Produce with the producer properties, then read everything back with the consumer's.
	prod, err := kgo.NewClient(kgoOpts(t, producerProps, addr)...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	want := map[string]bool{"from franz-go": true}
	if kcatRan {
		for _, l := range sortedLines(blocksOf(blocks, "text")) {
			want[l] = true
		}
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("from franz-go")}).FirstErr(); err != nil {
		t.Fatalf("franz-go produce with %v: %v", producerProps, err)
	}
	cons, err := kgo.NewClient(append(kgoOpts(t, groupProps, addr), kgo.ConsumeTopics(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumer read %v, want %v", got, want)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("franz-go consumer: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for v := range got {
		if !want[v] {
			t.Errorf("franz-go consumer read %q, which nobody produced", v)
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("commit: %v", err)
	}
	cons.Close()
	prod.Close()

	// Ctrl-C drains and stops the node.
	if err := node.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-nodeDone:
		if err != nil {
			t.Errorf("node exited with %v after SIGINT, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("node still running 30 s after SIGINT")
	}
	if kcat == "" {
		t.Skip("kcat is not installed (Debian package kcat; scripts/setup.sh installs it): its steps were skipped")
	}
}

// waitListening waits until addr accepts connections, failing if the node exits first.
func waitListening(t *testing.T, addr string, done chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("node exited before listening on %s: %v", addr, err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("node not listening on %s after 30 s", addr)
}

func sortedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

func blocksOf(blocks []block, lang string) string {
	var s string
	for _, b := range blocks {
		if b.lang == lang {
			s += b.text
		}
	}
	return s
}

// parseProperties reads key=value lines (Java's properties format, as the README writes it).
func parseProperties(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("README's properties line %q is not key=value", l)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// kgoOpts maps client properties to franz-go's options, with the node at addr in place of
// the README's address. Every property the README shows must be here: an unknown one fails
// the test rather than going untried.
func kgoOpts(t *testing.T, props map[string]string, addr string) []kgo.Opt {
	t.Helper()
	var opts []kgo.Opt
	for k, v := range props {
		switch k {
		case "bootstrap.servers":
			if v != readmeAddr {
				t.Fatalf("bootstrap.servers=%s: the quickstart's node is %s", v, readmeAddr)
			}
			opts = append(opts, kgo.SeedBrokers(addr))
		case "acks":
			switch v {
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			case "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			default:
				t.Fatalf("acks=%s is not mapped", v)
			}
		case "enable.idempotence":
			if b, err := strconv.ParseBool(v); err != nil {
				t.Fatalf("enable.idempotence=%s: %v", v, err)
			} else if !b {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
		case "group.id":
			opts = append(opts, kgo.ConsumerGroup(v))
		case "auto.offset.reset":
			switch v {
			case "earliest":
				opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			case "latest":
				opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
			default:
				t.Fatalf("auto.offset.reset=%s is not mapped", v)
			}
		default:
			t.Fatalf("README's quickstart sets %s, which this test does not map to franz-go", k)
		}
	}
	return opts
}
