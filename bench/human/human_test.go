package human

import (
	"math"
	"testing"
)

func TestNumbersForPeople(t *testing.T) {
	f := 1.5
	for _, c := range []struct{ got, want string }{
		{Thousands(1234567.4), "1,234,567"},
		{Thousands(-1000), "-1,000"},
		{Thousands(math.NaN()), "–"},
		{Micros(999), "999 µs"},
		{Micros(12_340), "12.34 ms"},
		{Micros(2_500_000), "2.50 s"},
		{MicrosOrNone(0), "–"},
		{MiB(3 << 20), "3 MiB"},
		{Fixed(math.Inf(1), 2), "–"},
		{Ratio(nil), "–"},
		{Ratio(&f), "1.50×"},
		{Runs(3, 0), "3"},
		{Runs(3, 1), "3 (1 failed)"},
		{ShortCommit("0123456789abcdef"), "0123456789ab"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestCommandLineQuotesWhatTheShellWouldSplit(t *testing.T) {
	got := CommandLine([]string{"bin/bench", "--peer", "x=run {port} 'q'", ""})
	if want := `bin/bench --peer 'x=run {port} '\''q'\''' ''`; got != want {
		t.Errorf("CommandLine = %s, want %s", got, want)
	}
}
