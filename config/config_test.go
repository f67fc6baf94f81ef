package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"inlet/auth"
)

// TestSecureExample loads examples/secure.yaml and checks what the issue asks of it.
func TestSecureExample(t *testing.T) {
	f, err := Load("../examples/secure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := f.FlagValues()
	if err != nil {
		t.Fatal(err)
	}
	if vals["registry-listen"] != "127.0.0.1:8081" {
		t.Errorf("registry-listen = %q", vals["registry-listen"])
	}
	r, err := f.Resolve(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Listeners) != 2 || r.Listeners[0].Address != "127.0.0.1:9092" || r.Listeners[0].Protocol != "PLAINTEXT" ||
		r.Listeners[1].Address != "127.0.0.1:9093" || r.Listeners[1].Protocol != "SASL_PLAINTEXT" {
		t.Fatalf("listeners: %+v", r.Listeners)
	}
	if a := r.Listeners[0].Anonymous; a == nil || !a.AllowsTopicString("public.x") || a.AllowsTopicString("alice.x") {
		t.Errorf("public listener principal %+v", a)
	}
	for _, u := range []struct{ name, pw, prefix string }{{"alice", "alice-secret", "alice."}, {"bob", "bob-secret", "bob."}} {
		for _, mech := range []string{auth.Plain} {
			x, _ := r.Users.Start(mech)
			if _, _, err := x.Step([]byte("\x00" + u.name + "\x00" + u.pw)); err != nil {
				t.Errorf("%s cannot log in with %s: %v", u.name, mech, err)
			}
			if p := x.Principal(); p == nil || !p.AllowsTopicString(u.prefix+"t") {
				t.Errorf("%s principal %+v", u.name, p)
			}
		}
	}
	sub, ok := r.Schemas.Subject("alice.orders-value")
	if !ok || r.Schemas.Topic([]byte("alice.orders")) == nil || sub.Latest().ID <= 0 {
		t.Fatal("alice.orders is not bound to alice.orders-value")
	}
}

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
		{"bad schema", "schemas:\n  - subject: s\n    schema: '{\"type\":\"record\"}'\n", "subject s"},
		{"unbound subject", "topics:\n  - name: t\n    value_subject: nope\n", "nope"},
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

func TestPasswordFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("file-secret\n"), 0o600)
	cfg := []byte("users:\n  - name: a\n    password_file: pw\n    topic_prefixes: [a.]\n  - name: b\n    password_env: B_PW\n    topic_prefixes: [b.]\n")
	os.WriteFile(filepath.Join(dir, "c.yaml"), cfg, 0o600)
	f, err := Load(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Resolve(func(k string) string {
		if k == "B_PW" {
			return "env-secret"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for user, pw := range map[string]string{"a": "file-secret", "b": "env-secret"} {
		x, _ := r.Users.Start(auth.Plain)
		if _, _, err := x.Step([]byte("\x00" + user + "\x00" + pw)); err != nil {
			t.Errorf("%s: %v", user, err)
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
