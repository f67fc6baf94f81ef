package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files the link check reads: README.md, DESIGN.md and every .md
// under docs/, as paths relative to the root.
func pages(t *testing.T, root string) []string {
	t.Helper()
	out := []string{"README.md", "DESIGN.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// inlineLink is [text](target) and ![alt](target), with an optional "title".
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink is a reference definition: [label]: target.
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	urlScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// mdLines returns a page's lines outside fenced code blocks, with their line numbers.
func mdLines(text string) (lines []string, numbers []int) {
	fence := ""
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		lines = append(lines, l)
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// slug is GitHub's anchor for a heading: the heading's text (code spans as their content,
// links as their text), lower-cased, without anything but letters, digits, '_', '-' and
// spaces, and spaces as '-'.
func slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the #fragments a page defines: its headings' slugs (a repeated one numbered
// -1, -2, ... as GitHub does) and explicit <a id="..."> or <a name="..."> anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines, _ := mdLines(text)
	for _, l := range lines {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

// TestLinksResolve checks every link of README.md, DESIGN.md and docs/**/*.md: a relative
// link names a file or directory inside the repository (never outside it, as a link to a
// sibling checkout would), and a #fragment names a heading or anchor of the page it points
// at. Links with a scheme (https:, mailto:) are left alone; absolute paths are refused, as
// they name nothing in a checkout.
func TestLinksResolve(t *testing.T) {
	root := Root(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := cache[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		cache[rel] = anchors(string(b))
		return cache[rel], nil
	}
	checked := 0
	for _, page := range pages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := mdLines(string(b))
		for i, l := range lines {
			l = codeSpan.ReplaceAllString(l, "")
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(l); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				checked++
				where := page + ":" + itoa(numbers[i])
				if urlScheme.MatchString(target) {
					continue
				}
				if strings.HasPrefix(target, "/") {
					t.Errorf("%s: link %q is an absolute path; link relative to the page", where, target)
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := page
				if path != "" {
					dest = filepath.Clean(filepath.Join(filepath.Dir(page), path))
					if dest == ".." || strings.HasPrefix(dest, ".."+string(filepath.Separator)) {
						t.Errorf("%s: link %q leaves the repository", where, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s: link %q: %s does not exist", where, target, dest)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q has a fragment, but %s is not a Markdown page", where, target, dest)
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					t.Errorf("%s: link %q: %v", where, target, err)
					continue
				}
				if !a[frag] {
					t.Errorf("%s: link %q: %s has no heading or anchor #%s", where, target, dest, frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("found only %d links: the link pattern is broken", checked)
	}
}

// TestSlug pins the anchors GitHub gives the headings these pages link to.
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Many nodes behind one address (HAProxy, SNI)", "many-nodes-behind-one-address-haproxy-sni"},
		{"On disk (`--data-dir`)", "on-disk---data-dir"},
		{"SASL PLAIN's cost (`auth/plaincache.go`, `conn/sasl_limits.go`)", "sasl-plains-cost-authplaincachego-connsasl_limitsgo"},
		{"What \"acknowledged\" means", "what-acknowledged-means"},
		{"The config file: [keys](x.md)", "the-config-file-keys"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
	a := anchors("# A\n\n## A\n\n```\n# not a heading\n```\n<a id=\"x\"></a>\n")
	for _, want := range []string{"a", "a-1", "x"} {
		if !a[want] {
			t.Errorf("anchors lack %q: %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block counted as a heading")
	}
}
