package config

import (
	"os"
	"testing"

	"inlet/auth"
	"inlet/schema"
)

// FuzzParse: the config loader never panics on any input, and what it accepts resolves or
// fails with an error (never a panic), as do the user directory and the schema registry built
// from what it resolves (as cmd/inlet builds them). Environment lookups answer nothing; file paths in the
// input are read relative to a temporary directory.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../examples/secure.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("workers: 3\nlisten: 127.0.0.1:0\n"))
	f.Add([]byte("listeners:\n  - address: x:1\n    security_protocol: SSL\n    tls: {cert_file: a, key_file: b}\n"))
	f.Add([]byte("schemas:\n  - subject: s\n    type: JSON\n    schema: '{\"type\":\"object\"}'\ntopics:\n  - {name: t, value_subject: s}\n"))
	f.Add([]byte("users: [{name: a, topic_prefixes: [x], scram_sha_512: {salt: eA==, iterations: 4096, stored_key: eA==, server_key: eA==}}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := Parse(b)
		if err != nil {
			return
		}
		fl.dir = t.TempDir()
		st, err := fl.Resolve(func(string) string { return "" })
		if err != nil {
			return
		}
		_, _ = auth.NewUsers(st.Users)
		if st.HasSchemas() {
			_, _ = schema.New(st.SchemaDefs, st.SchemaBindings)
		}
	})
}
