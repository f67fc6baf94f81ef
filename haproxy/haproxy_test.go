package haproxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const threeNodes = `
nodes:
  - name: node1
    address: 10.0.0.11
    kafka_port: 9093
    registry_port: 8081
  - name: node2
    address: Broker-2.internal
    kafka_port: 9093
    registry_port: 8081
  - name: node3
    address: "::1"
    kafka_port: 19093
`

func TestWriteRoutesEachNameToItsNode(t *testing.T) {
	nodes, err := ParseNodes([]byte(threeNodes))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, nodes, Options{Domain: "inlet.test", KafkaBind: ":9093", RegistryBind: "127.0.0.1:8081"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"mode tcp",
		"frontend kafka\n    bind :9093\n    tcp-request inspect-delay 5s\n    tcp-request content reject unless { req_ssl_hello_type 1 }\n",
		"    tcp-request content reject unless { req_ssl_sni -i node1.inlet.test node2.inlet.test node3.inlet.test }\n",
		"    use_backend kafka-node1 if { req_ssl_sni -i node1.inlet.test }\n",
		"    use_backend kafka-node3 if { req_ssl_sni -i node3.inlet.test }\n",
		"frontend registry\n    bind 127.0.0.1:8081\n",
		"    tcp-request content reject unless { req_ssl_sni -i node1.inlet.test node2.inlet.test }\n",
		"    use_backend registry-node2 if { req_ssl_sni -i node2.inlet.test }\n",
		"backend kafka-node1\n    server node1 10.0.0.11:9093\n",
		"backend kafka-node2\n    server node2 broker-2.internal:9093\n",
		"backend kafka-node3\n    server node3 [::1]:19093\n",
		"backend registry-node1\n    server node1 10.0.0.11:8081\n",
		"advertises <node>.inlet.test:9093",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// node3 has no registry: no route to one, and no default backend anywhere.
	if !strings.Contains(out, "registry_tls") {
		t.Errorf("the header does not mention registry_tls:\n%s", out)
	}
	for _, bad := range []string{"registry-node3", "default_backend"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
}

// TestWriteIsValidHAProxy checks the output with haproxy -c when HAProxy is installed (the
// crashtest package runs it for real, and fails in CI without it).
func TestWriteIsValidHAProxy(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/haproxy"); err != nil {
			t.Skip("haproxy is not installed (Debian package haproxy; scripts/setup.sh installs it)")
		}
	}
	// Host names would be resolved by haproxy -c: use addresses only.
	nodes, err := ParseNodes([]byte(strings.ReplaceAll(threeNodes, "Broker-2.internal", "127.0.0.2")))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = Write(f, nodes, Options{Domain: "inlet.test", KafkaBind: "127.0.0.1:9093", RegistryBind: "[::1]:8081"})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "WARNING") {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

func TestParseNodesRefusesBadMaps(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"empty file", "", "no nodes"},
		{"no nodes", "nodes: []", "no nodes"},
		{"unknown key", "nodes: [{name: a, address: 10.0.0.1, kafka_port: 1, port: 2}]", "field port not found"},
		{"missing name", "nodes: [{address: 10.0.0.1, kafka_port: 9093}]", "nodes[0].name: missing"},
		{"upper-case name", "nodes: [{name: Node1, address: 10.0.0.1, kafka_port: 9093}]", `"Node1" is not a DNS label`},
		{"name with a dot", "nodes: [{name: a.b, address: 10.0.0.1, kafka_port: 9093}]", "not a DNS label"},
		{"name ending in -", "nodes: [{name: a-, address: 10.0.0.1, kafka_port: 9093}]", "not a DNS label"},
		{"duplicate name", "nodes: [{name: a, address: 10.0.0.1, kafka_port: 9093}, {name: a, address: 10.0.0.2, kafka_port: 9093}]", `nodes[1].name: "a" is also nodes[0]`},
		{"missing address", "nodes: [{name: a, kafka_port: 9093}]", "nodes[0] (a).address: missing"},
		{"address with a port", "nodes: [{name: a, address: '10.0.0.1:9093', kafka_port: 9093}]", "has a port"},
		{"address not a name", "nodes: [{name: a, address: 'no such host', kafka_port: 9093}]", "neither a host name nor an IP address"},
		{"bad IPv4 address", "nodes: [{name: a, address: 300.1.1.1, kafka_port: 9093}]", "neither a host name nor an IP address"},
		{"zoned IPv6 address", "nodes: [{name: a, address: 'fe80::1%eth0', kafka_port: 9093}]", "zoned"},
		{"missing kafka_port", "nodes: [{name: a, address: 10.0.0.1, registry_port: 8081}]", "nodes[0] (a).kafka_port: missing"},
		{"kafka_port out of range", "nodes: [{name: a, address: 10.0.0.1, kafka_port: 70000}]", "kafka_port: 70000 is not a port"},
		{"negative registry_port", "nodes: [{name: a, address: 10.0.0.1, kafka_port: 9093, registry_port: -1}]", "registry_port: -1 is not a port"},
		{"port not a number", "nodes: [{name: a, address: 10.0.0.1, kafka_port: x}]", "cannot unmarshal"},
		{"same address and port twice", "nodes: [{name: a, address: 10.0.0.1, kafka_port: 9093}, {name: b, address: 10.0.0.1, kafka_port: 9093}]", "nodes[1] (b).kafka_port: 10.0.0.1:9093 is also a.kafka_port"},
		{"registry on the kafka port", "nodes: [{name: a, address: 10.0.0.1, kafka_port: 9093, registry_port: 9093}]", "registry_port: 10.0.0.1:9093 is also a.kafka_port"},
	} {
		_, err := ParseNodes([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWriteRefusesBadOptions(t *testing.T) {
	nodes, err := ParseNodes([]byte(threeNodes))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no domain", Options{KafkaBind: ":9093"}, `domain ""`},
		{"domain with a leading dot", Options{Domain: ".inlet.test", KafkaBind: ":9093"}, "not a DNS name"},
		{"upper-case domain", Options{Domain: "Inlet.test", KafkaBind: ":9093"}, "not a DNS name"},
		{"bind without a port", Options{Domain: "inlet.test", KafkaBind: "127.0.0.1"}, "kafka bind"},
		{"bind on a host name", Options{Domain: "inlet.test", KafkaBind: "proxy:9093"}, "must be an IP address"},
		{"bad registry port", Options{Domain: "inlet.test", KafkaBind: ":9093", RegistryBind: ":0"}, "registry bind"},
		{"one port for both", Options{Domain: "inlet.test", KafkaBind: "127.0.0.1:9093", RegistryBind: ":9093"}, "both on port 9093"},
	} {
		err := Write(&strings.Builder{}, nodes, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestWriteWithoutRegistries: no registry front end when no node has a registry_port.
func TestWriteWithoutRegistries(t *testing.T) {
	nodes, err := ParseNodes([]byte("nodes: [{name: a, address: 10.0.0.1, kafka_port: 9093}]"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, nodes, Options{Domain: "inlet.test", KafkaBind: ":9093", RegistryBind: ":8081"}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "registry") || !strings.Contains(out, "use_backend kafka-a if { req_ssl_sni -i a.inlet.test }") {
		t.Errorf("output:\n%s", out)
	}
}
