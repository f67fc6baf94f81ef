package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"inlet/config"
)

// TestEveryFlagHasAConfigKey keeps the config file's keys and the flags in step: every flag
// (but --config itself) is settable in the file under its name with '_' for '-'. The flags
// are defined inside main, so they are read from its source.
func TestEveryFlagHasAConfigKey(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`flag\.(?:String|Int|Bool|Duration|Int64|Uint)\("([a-z0-9-]+)"`).FindAllStringSubmatch(string(src), -1) {
		if m[1] == "config" {
			continue
		}
		names[m[1]] = true
		if _, ok := config.FlagKeys[strings.ReplaceAll(m[1], "-", "_")]; !ok {
			t.Errorf("flag --%s has no config key", m[1])
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d flags in main.go", len(names))
	}
	for k := range config.FlagKeys {
		if !names[strings.ReplaceAll(k, "_", "-")] {
			t.Errorf("config key %s has no flag", k)
		}
	}
}
