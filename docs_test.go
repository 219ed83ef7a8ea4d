package entflake

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// markdownLink is a link or an image of Markdown: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// codeSpan is an inline code span.
var codeSpan = regexp.MustCompile("`[^`]*`")

// prose returns the lines of a Markdown file outside fenced code blocks,
// with inline code spans blanked, so that code is never read as links or
// headings.
func prose(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		out = append(out, codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			if strings.HasPrefix(strings.TrimLeft(line, " "), "#") {
				return strings.Trim(s, "`") // a heading keeps the words of its code spans
			}
			return strings.Repeat(" ", len(s))
		}))
	}
	return out
}

// anchors returns the anchors GitHub gives a Markdown file's headings:
// lower case, spaces to hyphens, punctuation dropped, a repeat numbered.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocLinks: every relative link and anchor in README.md,
// CONTRIBUTING.md and docs/ resolves: the file exists, and the anchor is a
// heading of it. A page moved or a heading renamed fails here.
func TestDocLinks(t *testing.T) {
	files := []string{"README.md", "CONTRIBUTING.md"}
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	files = append(files, pages...)
	links := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range prose(string(b)) {
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
				}
				text, err := os.ReadFile(dest)
				if !assert.NoError(t, err, "%s: link %s", f, target) || anchor == "" {
					continue
				}
				assert.True(t, anchors(string(text))[anchor], "%s: link %s: no heading with that anchor in %s", f, target, dest)
			}
		}
	}
	assert.Greater(t, links, 20, "the links read")
}
