package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("secret\n"), 0o600)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown key", "workerz: 3\n", "workerz"},
		{"bad int", "workers: many\n", "workers"},
		{"bad size", "inflight_budget: lots\n", "inflight_budget"},
		{"bad bool", "auto_create_topics: maybe\n", "auto_create_topics"},
		{"bad protocol", "listeners:\n  - address: 127.0.0.1:1\n    security_protocol: SASL_FOO\n", "listeners[0].security_protocol"},
		{"sasl without users", "listeners:\n  - address: 127.0.0.1:1\n    security_protocol: SASL_PLAINTEXT\n", "needs users"},
		{"ssl without tls", "listeners:\n  - address: 127.0.0.1:1\n    security_protocol: SSL\n", "listeners[0].tls"},
		{"registry tls without a key", "registry_tls:\n  cert_file: server.pem\n", "registry_tls: cert_file and key_file are both required"},
		{"registry tls cert missing", "registry_tls:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent-key.pem\n", "registry_tls.cert_file/key_file"},
		{"bad mechanism", "users:\n  - name: a\n    password_file: " + pw + "\n    topic_prefixes: [a.]\nlisteners:\n  - address: 127.0.0.1:1\n    security_protocol: SASL_PLAINTEXT\n    sasl_mechanisms: [GSSAPI]\n", "sasl_mechanisms[0]"},
		{"plain password", "users:\n  - name: a\n    password: x\n    topic_prefixes: [a.]\n", "users[0] (a).password"},
		{"missing env", "users:\n  - name: a\n    password_env: INLET_TEST_NOPE\n    topic_prefixes: [a.]\n", "password_env"},
		{"no prefixes", "users:\n  - name: a\n    password_file: " + pw + "\n", "topic_prefixes"},
		{"bad credential", "users:\n  - name: a\n    topic_prefixes: [a.]\n    scram_sha_256: {salt: '!!', iterations: 4096, stored_key: eA==, server_key: eA==}\n", "scram_sha_256.salt"},
		{"zero quota", "quotas:\n  - user: a\n    producer_byte_rate: 0\n", "quotas[0].producer_byte_rate"},
		{"two default quotas", "quotas:\n  - consumer_byte_rate: 10\n  - producer_byte_rate: 10\n", "quotas[1].user"},
	} {
		f, err := Parse([]byte(tc.yaml))
		if err == nil {
			_, err = f.Resolve(func(string) string { return "" })
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}

// TestQuotas: quotas by user, and the default user's for an entry without one.
func TestQuotas(t *testing.T) {
	f, err := Parse([]byte("quotas:\n  - user: alice\n    producer_byte_rate: 1000\n  - consumer_byte_rate: 2000\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Resolve(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Quotas); got != "map[<default>:map[consumer_byte_rate:2000] alice:map[producer_byte_rate:1000]]" {
		t.Fatalf("quotas %s", got)
	}
}
