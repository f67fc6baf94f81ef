package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"inlet/auth"
	"inlet/config"
	"inlet/docs"
)

// TestEveryFlagHasAConfigKey keeps the config file's keys and the flags in step: every flag
// (but --config itself) is settable in the file under its name with '_' for '-'.
func TestEveryFlagHasAConfigKey(t *testing.T) {
	fs, _ := newFlags()
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" || f.Name == "version" {
			return
		}
		names[f.Name] = true
		if _, ok := config.FlagKeys[strings.ReplaceAll(f.Name, "-", "_")]; !ok {
			t.Errorf("flag --%s has no config key", f.Name)
		}
	})
	if len(names) < 10 {
		t.Fatalf("found only %d flags", len(names))
	}
	for k := range config.FlagKeys {
		if !names[strings.ReplaceAll(k, "_", "-")] {
			t.Errorf("config key %s has no flag", k)
		}
	}
}

// TestStrayArgumentIsRefused guards against Go's flag parsing stopping silently at the first
// argument that is not a flag: `--auto-create-topics false` used to leave auto-creation on and
// drop every flag after it.
func TestStrayArgumentIsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--auto-create-topics", "false", "--listen", "127.0.0.1:1"}, []string{`"false"`, "--auto-create-topics=false"}},
		{[]string{"--data-dir", "d", "extra"}, []string{`"extra"`}},
		{[]string{"a", "b"}, []string{`"a"`, `"b"`}},
	} {
		_, _, err := parseFlags(tc.args)
		if err == nil {
			t.Errorf("%q: accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not mention %s", tc.args, err, w)
			}
		}
	}
	_, o, err := parseFlags([]string{"--auto-create-topics=false", "--listen", "127.0.0.1:1"})
	if err != nil || *o.autoCreate || *o.listen != "127.0.0.1:1" {
		t.Errorf("--auto-create-topics=false: err %v, auto-create %v, listen %q", err, *o.autoCreate, *o.listen)
	}
}

// TestHelpListsEveryFlagWithItsDefault: Go's PrintDefaults leaves out zero defaults (an empty
// --advertise, --log-level's "info" is shown but "" is not); the usage shows all of them.
func TestHelpListsEveryFlagWithItsDefault(t *testing.T) {
	fs, _ := newFlags()
	var buf bytes.Buffer
	printUsage(&buf, fs)
	out := buf.String()
	fs.VisitAll(func(f *flag.Flag) {
		i := strings.Index(out, "--"+f.Name+" (default ")
		if i < 0 {
			t.Errorf("--help does not list --%s with its default", f.Name)
			return
		}
		line := out[i : i+strings.IndexByte(out[i:], '\n')]
		if f.DefValue != "" && !strings.Contains(line, f.DefValue) {
			t.Errorf("--help: %q lacks the default %q", line, f.DefValue)
		}
	})
	if _, _, err := parseFlags([]string{"--help"}); err != errHelp {
		t.Errorf("--help: %v, want errHelp", err)
	}
}

// markedTable returns the table rows between <!-- name:begin and <!-- name:end --> of a page,
// each split into its trimmed cells (the header and its rule left out).
func markedTable(t *testing.T, page, name string) [][]string {
	t.Helper()
	begin, end := strings.Index(page, "<!-- "+name+":begin"), strings.Index(page, "<!-- "+name+":end -->")
	if begin < 0 || end < begin {
		t.Fatalf("no %s:begin/%s:end table", name, name)
	}
	var rows [][]string
	for i, line := range strings.Split(page[begin:end], "\n") {
		if !strings.HasPrefix(line, "|") || i <= 3 && (strings.Contains(line, "---") || strings.Contains(line, "| key |") || strings.Contains(line, "| flag |")) {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestConfigurationPageListsEveryFlag keeps docs/configuration.md's flag table true: one row
// per flag and no row for anything else, each with the flag's config key (none for --config
// and --version, which config.FlagKeys must not have either) and its default as the code
// has it (--workers: the number of CPUs).
func TestConfigurationPageListsEveryFlag(t *testing.T) {
	rows := markedTable(t, docs.File(t, "docs/configuration.md"), "flags")
	fs, _ := newFlags()
	listed := map[string][]string{}
	for _, r := range rows {
		if len(r) < 4 {
			t.Errorf("configuration.md: row %q has %d cells, want flag, key, default, meaning", r, len(r))
			continue
		}
		name := strings.TrimPrefix(strings.Trim(r[0], "`"), "--")
		if listed[name] != nil {
			t.Errorf("configuration.md lists --%s twice", name)
		}
		listed[name] = r
	}
	fs.VisitAll(func(f *flag.Flag) {
		r := listed[f.Name]
		delete(listed, f.Name)
		if r == nil {
			t.Errorf("configuration.md's flag table has no row for --%s", f.Name)
			return
		}
		key := strings.ReplaceAll(f.Name, "-", "_")
		_, isKey := config.FlagKeys[key]
		switch {
		case f.Name == "config" || f.Name == "version":
			if r[1] != "none" || isKey {
				t.Errorf("--%s: key %q in the table, in config.FlagKeys %v; want none, and absent", f.Name, r[1], isKey)
			}
		case !isKey:
			t.Errorf("--%s has no config key", f.Name)
		case r[1] != "`"+key+"`":
			t.Errorf("--%s: the table's key is %s, want `%s`", f.Name, r[1], key)
		}
		want := "`" + f.DefValue + "`"
		if f.DefValue == "" {
			want = "`\"\"`"
		}
		if f.Name == "workers" {
			want = "number of CPUs"
			if f.DefValue != strconv.Itoa(runtime.NumCPU()) {
				t.Errorf("--workers defaults to %s, not the number of CPUs (%d)", f.DefValue, runtime.NumCPU())
			}
		}
		if r[2] != want {
			t.Errorf("--%s: the table's default is %s, the code's %s", f.Name, r[2], want)
		}
	})
	for name := range listed {
		t.Errorf("configuration.md's flag table lists --%s, which is not a flag", name)
	}
}

// TestConfigurationPageListsEveryKey keeps docs/configuration.md's table of the config
// file's structured keys equal to what config.File accepts: every key below its lists and
// maps (listeners[].tls.cert_file, users[].scram_sha_256.salt, ...), found by walking the
// YAML tags, has a row, and every row names such a key.
func TestConfigurationPageListsEveryKey(t *testing.T) {
	want := map[string]bool{}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			if typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.String {
				prefix += "[]"
			}
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(yaml.Node{}) {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if prefix == "" && f.Type == reflect.TypeOf(yaml.Node{}) {
				if _, ok := config.FlagKeys[tag]; !ok {
					t.Errorf("config key %s is a scalar but not in config.FlagKeys", tag)
				}
				continue // a flag's key: the flag table has it
			}
			key := tag
			if prefix != "" {
				key = prefix + "." + tag
			}
			want[key] = true
			walk(key, f.Type)
		}
	}
	walk("", reflect.TypeOf(config.File{}))
	if len(want) < 30 {
		t.Fatalf("found only %d structured keys", len(want))
	}
	listed := map[string]bool{}
	for _, r := range markedTable(t, docs.File(t, "docs/configuration.md"), "keys") {
		key := strings.Trim(r[0], "`")
		listed[key] = true
		if !want[key] {
			t.Errorf("configuration.md lists the config key %s, which config.File does not accept", key)
		}
	}
	for key := range want {
		if !listed[key] {
			t.Errorf("configuration.md does not list the config key %s", key)
		}
	}
}

// resolve is what start-up does with a config file's structured sections: its settings, and
// the user directory and schema registry built from them.
func resolve(f *config.File, getenv func(string) string) (*security, error) {
	s, users, reg, err := loadSecurity(f, getenv)
	if err != nil {
		return nil, err
	}
	return &security{Settings: s, Users: users, Schemas: reg}, nil
}

// TestSecureExample loads examples/secure.yaml and checks what the issue asks of it.
func TestSecureExample(t *testing.T) {
	f, err := config.Load("../../examples/secure.yaml")
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
	r, err := resolve(f, func(string) string { return "" })
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

// TestBuildErrorsNameTheKey: errors found when the schema registry is built from the
// settings name what they are about.
func TestBuildErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bad schema", "schemas:\n  - subject: s\n    schema: '{\"type\":\"record\"}'\n", "subject s"},
		{"unbound subject", "topics:\n  - name: t\n    value_subject: nope\n", "nope"},
	} {
		f, err := config.Parse([]byte(tc.yaml))
		if err == nil {
			_, err = resolve(f, func(string) string { return "" })
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
	f, err := config.Load(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolve(f, func(k string) string {
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
