package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"inlet/config"
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

// TestREADMEListsEveryFlag keeps the README's flag table true: every flag has a row (a row may
// name several flags), and every flag a row names exists.
func TestREADMEListsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	begin := strings.Index(s, "| flag | default | meaning |")
	if begin < 0 {
		t.Fatal("README.md has no flag table")
	}
	table := s[begin:]
	if end := strings.Index(table, "\n\n"); end >= 0 {
		table = table[:end]
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(table, "\n")[2:] {
		first := strings.Split(line, "|")[1]
		for _, f := range strings.Split(first, ",") {
			listed[strings.Trim(strings.TrimSpace(f), "`-")] = true
		}
	}
	fs, _ := newFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			t.Errorf("README's flag table has no row for --%s", f.Name)
		}
		delete(listed, f.Name)
	})
	for name := range listed {
		t.Errorf("README's flag table lists --%s, which is not a flag", name)
	}
}
