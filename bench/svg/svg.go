// Package svg draws the report's charts as plain SVG, written by hand: line charts of medians
// along x with each run as a dot (LineChart), and bar charts of one median per target
// (BarChart). Rendering is a pure function of the chart's fields: SVG returns the document.
//
// Files: svg.go.
package svg

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The charts are plain SVG written by hand: a fixed canvas, a zero-based y axis with "nice"
// ticks, one polyline per series (line charts) or one rectangle per target (bar charts), the
// individual runs as small dots over the medians, and a legend. Every text goes through
// xml.EscapeText, so target names and labels cannot break the document.

const (
	chartWidth  = 760
	chartHeight = 420
	marginLeft  = 84
	marginRight = 200 // legend
	marginTop   = 48
	marginBot   = 58
	plotWidth   = chartWidth - marginLeft - marginRight
	plotHeight  = chartHeight - marginTop - marginBot
)

// palette is the Okabe-Ito colour-blind-safe set.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

// Point is one x, y value of a series.
type Point struct{ X, Y float64 }

// Series is one line: the medians, joined, and the individual runs as dots.
type Series struct {
	Name   string
	Points []Point
	Raw    []Point
}

// LineChart is a chart of one polyline per series over a shared x axis; XFormat and YFormat
// print the tick values (nil: an SI suffix).
type LineChart struct {
	Title, Subtitle string
	XLabel, YLabel  string
	Series          []Series
	// LogX places x on a log2 scale with a tick at every x in the data (worker counts).
	LogX             bool
	XFormat, YFormat func(float64) string
}

// Bar is one target's median (Value) and its single runs (Raw).
type Bar struct {
	Label string
	Value float64
	Raw   []float64
}

// BarChart is a chart of one bar per target; YFormat prints the tick values (nil: an SI
// suffix).
type BarChart struct {
	Title, Subtitle string
	YLabel          string
	Bars            []Bar
	YFormat         func(float64) string
}

// svgWriter accumulates the document.
type svgWriter struct {
	b                          bytes.Buffer
	legendLines, legendEntries int
}

func (w *svgWriter) open(title, subtitle string) {
	fmt.Fprintf(&w.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	w.b.WriteString(`<title>`)
	_ = xml.EscapeText(&w.b, []byte(title))
	w.b.WriteString("</title>\n")
	fmt.Fprintf(&w.b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, chartHeight)
	w.text(marginLeft, 22, "start", "font-size=\"15\" font-weight=\"bold\"", title)
	if subtitle != "" {
		w.text(marginLeft, 38, "start", `font-size="11" fill="#555555"`, subtitle)
	}
}

func (w *svgWriter) close() []byte {
	w.b.WriteString("</svg>\n")
	return w.b.Bytes()
}

// text writes a text element; attrs is raw attribute text the caller controls.
func (w *svgWriter) text(x, y float64, anchor, attrs, s string) {
	fmt.Fprintf(&w.b, `<text x="%s" y="%s" text-anchor="%s"`, num(x), num(y), anchor)
	if attrs != "" {
		w.b.WriteString(" " + attrs)
	}
	w.b.WriteString(">")
	_ = xml.EscapeText(&w.b, []byte(s))
	w.b.WriteString("</text>\n")
}

func (w *svgWriter) line(x1, y1, x2, y2 float64, stroke string, width float64) {
	fmt.Fprintf(&w.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"/>`+"\n",
		num(x1), num(y1), num(x2), num(y2), stroke, num(width))
}

func (w *svgWriter) circle(x, y, r float64, fill string, opacity float64) {
	fmt.Fprintf(&w.b, `<circle cx="%s" cy="%s" r="%s" fill="%s" fill-opacity="%s"/>`+"\n", num(x), num(y), num(r), fill, num(opacity))
}

// yAxis draws the horizontal grid, the y tick labels and the y label, and returns the scale.
func (w *svgWriter) yAxis(maxY float64, label string, format func(float64) string) func(float64) float64 {
	ticks := niceTicks(maxY)
	top := ticks[len(ticks)-1]
	scale := func(v float64) float64 { return marginTop + plotHeight - v/top*plotHeight }
	for _, t := range ticks {
		y := scale(t)
		w.line(marginLeft, y, marginLeft+plotWidth, y, "#e0e0e0", 1)
		w.text(marginLeft-8, y+4, "end", "", format(t))
	}
	w.line(marginLeft, marginTop, marginLeft, marginTop+plotHeight, "#333333", 1)
	w.line(marginLeft, marginTop+plotHeight, marginLeft+plotWidth, marginTop+plotHeight, "#333333", 1)
	cx, cy := 18.0, float64(marginTop+plotHeight/2)
	w.text(cx, cy, "middle", fmt.Sprintf(`transform="rotate(-90 %s %s)"`, num(cx), num(cy)), label)
	return scale
}

// legend adds an entry below the previous ones; long names wrap onto further lines.
func (w *svgWriter) legend(name, color string) {
	x, y := float64(marginLeft+plotWidth+18), float64(marginTop+10+w.legendLines*15+w.legendEntries*8)
	fmt.Fprintf(&w.b, `<rect x="%s" y="%s" width="12" height="12" fill="%s"/>`+"\n", num(x), num(y-10), color)
	for i, line := range wrap(name, legendChars) {
		w.text(x+18, y+float64(i*15), "start", "", line)
		w.legendLines++
	}
	w.legendEntries++
}

// legendChars is about what fits in the legend column at 12px.
const legendChars = 23

// wrap splits s at spaces into lines of at most width characters (a longer word stays whole).
func wrap(s string, width int) []string {
	var lines []string
	var cur string
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case len([]rune(cur))+1+len([]rune(word)) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

func (w *svgWriter) noData() {
	w.text(marginLeft+plotWidth/2, marginTop+plotHeight/2, "middle", `fill="#888888"`, "no data")
}

// SVG renders the line chart.
func (c *LineChart) SVG() []byte {
	w := &svgWriter{}
	w.open(c.Title, c.Subtitle)
	xf, yf := orDefault(c.XFormat), orDefault(c.YFormat)
	var xs []float64
	maxY := 0.0
	for _, s := range c.Series {
		for _, p := range slices.Concat(s.Points, s.Raw) {
			if !finite(p.X) || !finite(p.Y) || (c.LogX && p.X <= 0) {
				continue
			}
			xs = append(xs, p.X)
			maxY = max(maxY, p.Y)
		}
	}
	scaleY := w.yAxis(maxY, c.YLabel, yf)
	w.text(marginLeft+plotWidth/2, chartHeight-14, "middle", "", c.XLabel)
	if len(xs) == 0 {
		w.noData()
		return w.close()
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	var scaleX func(float64) float64
	var xticks []float64
	if c.LogX {
		lo, hi := math.Log2(xs[0]), math.Log2(xs[len(xs)-1])
		scaleX = func(v float64) float64 {
			if hi == lo {
				return marginLeft + plotWidth/2
			}
			return marginLeft + 20 + (math.Log2(v)-lo)/(hi-lo)*(plotWidth-40)
		}
		xticks = xs
	} else {
		xticks = niceTicks(xs[len(xs)-1])
		top := xticks[len(xticks)-1]
		scaleX = func(v float64) float64 { return marginLeft + v/top*plotWidth }
	}
	for _, t := range xticks {
		x := scaleX(t)
		w.line(x, marginTop+plotHeight, x, marginTop+plotHeight+5, "#333333", 1)
		w.text(x, marginTop+plotHeight+20, "middle", "", xf(t))
	}
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		for _, p := range s.Raw {
			if finite(p.X) && finite(p.Y) && (!c.LogX || p.X > 0) {
				w.circle(scaleX(p.X), scaleY(p.Y), 2.5, color, 0.45)
			}
		}
		var pts bytes.Buffer
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) || (c.LogX && p.X <= 0) {
				continue
			}
			fmt.Fprintf(&pts, "%s,%s ", num(scaleX(p.X)), num(scaleY(p.Y)))
			w.circle(scaleX(p.X), scaleY(p.Y), 4, color, 1)
		}
		if pts.Len() > 0 {
			fmt.Fprintf(&w.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", bytes.TrimSpace(pts.Bytes()), color)
		}
		w.legend(s.Name, color)
	}
	return w.close()
}

// SVG renders the bar chart.
func (c *BarChart) SVG() []byte {
	w := &svgWriter{}
	w.open(c.Title, c.Subtitle)
	yf := orDefault(c.YFormat)
	maxY := 0.0
	for _, b := range c.Bars {
		for _, v := range append([]float64{b.Value}, b.Raw...) {
			if finite(v) {
				maxY = max(maxY, v)
			}
		}
	}
	scaleY := w.yAxis(maxY, c.YLabel, yf)
	if len(c.Bars) == 0 {
		w.noData()
		return w.close()
	}
	slot := float64(plotWidth) / float64(len(c.Bars))
	width := slot * 0.6
	for i, b := range c.Bars {
		color := palette[i%len(palette)]
		x := marginLeft + slot*float64(i) + (slot-width)/2
		if finite(b.Value) {
			y := scaleY(b.Value)
			fmt.Fprintf(&w.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
				num(x), num(y), num(width), num(marginTop+plotHeight-y), color)
			w.text(x+width/2, y-6, "middle", "", yf(b.Value))
		}
		for j, v := range b.Raw {
			if finite(v) {
				off := width * (0.25 + 0.5*float64(j+1)/float64(len(b.Raw)+1))
				w.circle(x+off, scaleY(v), 2.5, "#333333", 0.7)
			}
		}
		w.text(x+width/2, marginTop+plotHeight+20, "middle", "", b.Label)
	}
	return w.close()
}

// niceTicks returns ticks 0, step, ..., top with top ≥ maxY and about five steps of 1, 2,
// 2.5 or 5 times a power of ten.
func niceTicks(maxY float64) []float64 {
	if !finite(maxY) || maxY <= 0 {
		return []float64{0, 0.25, 0.5, 0.75, 1}
	}
	raw := maxY / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	n := int(math.Ceil(maxY/step - 1e-9))
	ticks := make([]float64, n+1)
	for i := range ticks {
		ticks[i] = float64(i) * step
	}
	return ticks
}

// si prints v with a k/M/G suffix and up to three significant digits.
func si(v float64) string {
	av := math.Abs(v)
	switch {
	case av >= 1e9:
		return TrimFloat(v/1e9) + "G"
	case av >= 1e6:
		return TrimFloat(v/1e6) + "M"
	case av >= 1e3:
		return TrimFloat(v/1e3) + "k"
	}
	return TrimFloat(v)
}

// TrimFloat prints v with at most two decimals and no trailing zeros.
func TrimFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func orDefault(f func(float64) string) func(float64) string {
	if f == nil {
		return si
	}
	return f
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
