package svg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

// checkSVG decodes b completely with encoding/xml and returns how many elements of each name
// it holds; the root must be an <svg> in the SVG namespace.
func checkSVG(t *testing.T, b []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	counts := map[string]int{}
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (el.Name.Local != "svg" || el.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element is %v, want svg in the SVG namespace", el.Name)
			}
			depth++
			counts[el.Name.Local]++
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 || counts["svg"] != 1 {
		t.Fatalf("unbalanced document (depth %d, %d svg elements)", depth, counts["svg"])
	}
	return counts
}

func TestLineChartIsWellFormedXML(t *testing.T) {
	c := LineChart{
		Title:    `Throughput <of> "inlet" & friends`,
		Subtitle: "a < b",
		XLabel:   "workers & such",
		YLabel:   "records/s",
		LogX:     true,
		Series: []Series{
			{Name: "idempotent, 16 producers <segments> & 'quotes'", Points: []Point{{1, 100}, {2, 180}, {4, 250}},
				Raw: []Point{{1, 90}, {1, 110}, {2, 170}}},
			{Name: "plain", Points: []Point{{1, 120}, {2, math.NaN()}, {0, 5}, {8, math.Inf(1)}}},
		},
	}
	b := c.SVG()
	counts := checkSVG(t, b)
	if counts["polyline"] != 2 {
		t.Errorf("%d polylines, want one per series", counts["polyline"])
	}
	// Three medians and three runs of the first series, one median of the second (NaN,
	// Inf and x=0 on a log axis are skipped).
	if counts["circle"] != 7 {
		t.Errorf("%d circles, want 7", counts["circle"])
	}
	if !strings.Contains(string(b), "&lt;segments&gt; &amp;") {
		t.Errorf("series name not escaped:\n%s", b)
	}
}

func TestBarChartIsWellFormedXML(t *testing.T) {
	c := BarChart{Title: "CPU </svg>", YLabel: "s", Bars: []Bar{
		{Label: "inlet", Value: 1.5, Raw: []float64{1.4, 1.6}},
		{Label: "a&b", Value: 3},
		{Label: "failed", Value: math.NaN()},
	}}
	counts := checkSVG(t, c.SVG())
	if counts["rect"] != 1+2 { // background and two finite bars
		t.Errorf("%d rects, want 3", counts["rect"])
	}
}

func TestEmptyChartsAreWellFormed(t *testing.T) {
	for _, b := range [][]byte{(&LineChart{Title: "empty"}).SVG(), (&BarChart{Title: "empty"}).SVG(),
		(&LineChart{Title: "one point", Series: []Series{{Name: "s", Points: []Point{{3, 0}}}}}).SVG()} {
		checkSVG(t, b)
		if strings.Contains(string(b), "NaN") || strings.Contains(string(b), "Inf") {
			t.Errorf("non-finite coordinate in:\n%s", b)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		max  float64
		want []float64
	}{
		{0, []float64{0, 0.25, 0.5, 0.75, 1}},
		{1, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{9, []float64{0, 2, 4, 6, 8, 10}},
		{1_124_174, []float64{0, 250000, 500000, 750000, 1e6, 1.25e6}},
		{300_528, []float64{0, 100000, 200000, 300000, 400000}},
	} {
		got := niceTicks(tc.max)
		if len(got) != len(tc.want) {
			t.Errorf("niceTicks(%v) = %v, want %v", tc.max, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("niceTicks(%v) = %v, want %v", tc.max, got, tc.want)
				break
			}
		}
		if top := got[len(got)-1]; top < tc.max {
			t.Errorf("niceTicks(%v) tops out at %v", tc.max, top)
		}
	}
}

func TestSIAndWrap(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 250000: "250k", 1.25e6: "1.25M", 12.5: "12.5", 3e9: "3G"} {
		if got := si(v); got != want {
			t.Errorf("si(%v) = %q, want %q", v, got, want)
		}
	}
	got := wrap("idempotent, 16 producers, 100-byte records, segments storage", 23)
	want := []string{"idempotent, 16", "producers, 100-byte", "records, segments", "storage"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrap = %q, want %q", got, want)
	}
}
