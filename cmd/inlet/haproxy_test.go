package main

import (
	"bytes"
	"flag"
	"inlet/docs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHAProxyConfigCommand: the subcommand's flags parse like inlet's own (stray arguments
// and bad node files exit 2 with the reason, --help lists every flag with its default).
func TestHAProxyConfigCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(good, []byte("nodes:\n  - {name: node1, address: 10.0.0.1, kafka_port: 9093, registry_port: 8081}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(dir, "dup.yaml")
	if err := os.WriteFile(dup, []byte("nodes: [{name: a, address: 10.0.0.1, kafka_port: 1}, {name: a, address: 10.0.0.2, kafka_port: 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"--nodes", good, "--domain", "inlet.test", "--kafka-bind", "127.0.0.1:19093"}, 0, "use_backend kafka-node1 if { req_ssl_sni -i node1.inlet.test }", ""},
		{[]string{"--nodes", good, "--domain", "inlet.test", "--registry-bind", ""}, 0, "frontend kafka", ""},
		{[]string{"--help"}, 0, "--kafka-bind (default \":9093\")", ""},
		{[]string{"--nodes", good, "--domain", "inlet.test", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"--nodes", good}, 2, "", "--nodes and --domain are required"},
		{[]string{"--nodes", dup, "--domain", "inlet.test"}, 2, "", `dup.yaml: nodes[1].name: "a" is also nodes[0]`},
		{[]string{"--nodes", filepath.Join(dir, "absent.yaml"), "--domain", "inlet.test"}, 2, "", "no such file"},
		{[]string{"--nodes", good, "--domain", "Inlet.test"}, 2, "", "not a DNS name"},
		{[]string{"--bogus"}, 2, "", "flag provided but not defined: -bogus"},
	} {
		var out, errOut bytes.Buffer
		code := haproxyCommand(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errOut) {
			t.Errorf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, out.String(), errOut.String())
		}
		if tc.code == 0 && errOut.Len() != 0 {
			t.Errorf("%q: stderr %q", tc.args, errOut.String())
		}
	}
	var out bytes.Buffer
	haproxyCommand([]string{"--nodes", good, "--domain", "inlet.test", "--registry-bind", ""}, &out, &bytes.Buffer{})
	if strings.Contains(out.String(), "frontend registry") {
		t.Errorf("--registry-bind \"\" still writes a registry front end:\n%s", out.String())
	}
}

// TestREADMEListsHAProxyConfigFlags keeps the table of haproxy-config's flags in
// docs/operations.md ("Many nodes behind one address") true.
func TestREADMEListsHAProxyConfigFlags(t *testing.T) {
	b := docs.File(t, "docs/operations.md")
	fs, _, _, _, _ := newHAProxyFlags()
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		def := "(required)"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		if row := "| `--" + f.Name + "` | " + def + " |"; !strings.Contains(b, row) {
			t.Errorf("docs/operations.md lacks the row %q", row)
		}
	})
	if got := strings.Count(b, "inlet haproxy-config"); n == 0 || got == 0 {
		t.Errorf("%d flags, docs/operations.md names the command %d times", n, got)
	}
}
