package bytesize

import "testing"

func TestParseSuffixesAndBounds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"1MiB", 1 << 20, true},
		{" 64KiB ", 64 << 10, true},
		{"2G", 2 << 30, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"1TiB", 0, false},
		{"", 0, false},
		{"4611686018427387904", 1 << 62, true},
		{"4611686018427387905", 0, false},
		{"4294967297GiB", 0, false},
	} {
		got, err := Parse(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseOrZeroAllowsZeroOnly(t *testing.T) {
	if n, err := ParseOrZero(" 0"); n != 0 || err != nil {
		t.Errorf("ParseOrZero(0) = %d, %v", n, err)
	}
	if _, err := ParseOrZero("-0x1"); err == nil {
		t.Error("ParseOrZero(-0x1) accepted")
	}
	if n, err := ParseOrZero("1K"); n != 1024 || err != nil {
		t.Errorf("ParseOrZero(1K) = %d, %v", n, err)
	}
}
