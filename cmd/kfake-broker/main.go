// Command kfake-broker runs franz-go's kfake as a one-broker cluster in its own process, so
// that `bench compare` measures it like any other broker (CPU, RSS and disk writes from /proc).
// It is here for comparison only.
//
// In memory by default; --data-dir persists the cluster's state there (kfake.DataDir), and
// --sync adds an fsync per written batch (kfake.SyncWrites). SIGTERM or SIGINT closes the
// cluster and exits 0.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9092", "host:port to listen on")
	dataDir := flag.String("data-dir", "", "persist the cluster's state in this directory (default: in memory only)")
	sync := flag.Bool("sync", false, "fsync every write (needs --data-dir)")
	partitions := flag.Int("default-partitions", 16, "partitions of auto-created topics")
	flag.Parse()

	host, portText, err := net.SplitHostPort(*listen)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port <= 0 {
		fail(2, "--listen %q is not host:port", *listen)
	}
	if *sync && *dataDir == "" {
		fail(2, "--sync needs --data-dir")
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		// kfake binds 127.0.0.1:<port>; bind the host asked for instead.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, portText))
		}),
		kfake.DefaultNumPartitions(*partitions),
		kfake.AllowAutoTopicCreation(),
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	if *sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fail(1, "%v", err)
	}
	fmt.Fprintf(os.Stderr, "kfake-broker: listening on %v (data dir %q, sync %t)\n", c.ListenAddrs(), *dataDir, *sync)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	c.Close()
}

func fail(code int, f string, a ...any) {
	fmt.Fprintf(os.Stderr, "kfake-broker: "+f+"\n", a...)
	os.Exit(code)
}
