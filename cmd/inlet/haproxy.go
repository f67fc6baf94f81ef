package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"inlet/haproxy"
)

// haproxyCommand is `inlet haproxy-config --nodes FILE --domain DOMAIN`: it prints the HAProxy
// configuration that routes TLS connections for <node>.<domain> to that node's Kafka listener
// and schema registry (package haproxy). Exit status 2 for bad flags or a bad node file.
func haproxyCommand(args []string, stdout, stderr io.Writer) int {
	fs, nodes, domain, kafkaBind, registryBind := newHAProxyFlags()
	fail := func(f string, a ...any) int {
		fmt.Fprintf(stderr, "inlet haproxy-config: "+f+"\nrun inlet haproxy-config --help for the flags\n", a...)
		return 2
	}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, "usage: inlet haproxy-config --nodes FILE --domain DOMAIN [flags]\n\nprints the HAProxy configuration (TCP mode, routed by TLS server name) for the nodes in FILE\n\nflags:")
		printFlags(stdout, fs)
		return 0
	}
	if err != nil {
		return fail("%v", err)
	}
	if rest := fs.Args(); len(rest) > 0 {
		return fail("unexpected argument %q: inlet haproxy-config takes only flags", rest[0])
	}
	if *nodes == "" || *domain == "" {
		return fail("--nodes and --domain are required")
	}
	b, err := os.ReadFile(*nodes)
	if err != nil {
		return fail("%v", err)
	}
	ns, err := haproxy.ParseNodes(b)
	if err != nil {
		return fail("%s: %v", *nodes, err)
	}
	if err := haproxy.Write(stdout, ns, haproxy.Options{Domain: *domain, KafkaBind: *kafkaBind, RegistryBind: *registryBind}); err != nil {
		return fail("%v", err)
	}
	return 0
}

// newHAProxyFlags defines haproxy-config's flags (docs/operations.md, "Many nodes behind one
// address", lists them with their defaults).
func newHAProxyFlags() (fs *flag.FlagSet, nodes, domain, kafkaBind, registryBind *string) {
	fs = flag.NewFlagSet("inlet haproxy-config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes = fs.String("nodes", "", "node map (YAML: nodes: [{name, address, kafka_port, registry_port}]); required")
	domain = fs.String("domain", "", "nodes are <name>.<domain> (their TLS server names and advertised hosts); required")
	kafkaBind = fs.String("kafka-bind", ":9093", "host:port the proxy takes Kafka connections on (empty host: every address); every node advertises this port")
	registryBind = fs.String("registry-bind", ":8081", `host:port the proxy takes schema registry (HTTPS) connections on; "": no registry front end`)
	return fs, nodes, domain, kafkaBind, registryBind
}
