package extract_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"

	"relaybot/internal/testkit/files"
	"relaybot/knowledge/extract"
	"relaybot/media/sandbox"
)

// TestMain lets the test binary be the reader process PDFs are parsed in, as the bot's is.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

func read(t testing.TB, name string, data []byte, l extract.Limits, o extract.ChunkOptions) (extract.Document, error) {
	t.Helper()
	return extract.Read(context.Background(), name, bytes.NewReader(data), l, o, nil)
}

func TestDetectNamesTheFormatOrRefusesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		head string
		want extract.Format
	}{
		{"Guide.MD", "# Guide", extract.Markdown},
		{"notes.markdown", "", extract.Markdown},
		{"readme.txt", "hello", extract.Text},
		{"scan.PDF", "%PDF-1.7\n", extract.PDF},
		{"renamed.txt", "%PDF-1.4\n", extract.PDF},
		{"upload.pdf", "", extract.PDF},
		{"fake.pdf", "<html>", ""},
		{`C:\docs\faq.text`, "", extract.Text},
		{"report.docx", "PK\x03\x04", ""},
		{"archive.zip", "PK\x03\x04", ""},
		{"noextension", "just words", ""},
		{"index.HTM", "", extract.HTML},
		{"prices.csv", "a,b\n1,2", extract.CSV},
		{"export.TSV", "a\tb", extract.CSV},
		{"page", "\n  <!DOCTYPE html><html>", extract.HTML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := extract.Detect(tc.name, []byte(tc.head))
			if tc.want == "" {
				if !errors.Is(err, extract.ErrUnknownFormat) {
					t.Fatalf("Detect = %q, %v; want the file refused as an unknown format", got, err)
				}
				if !strings.Contains(err.Error(), "Markdown (.md)") {
					t.Fatalf("the refusal %q does not name the formats accepted", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// report is a PDF of five pages, a fact on page 3 and no text on page 4.
var report = files.PDF([][]string{
	{"Quarterly report", "Page one is the summary."},
	{"Page two lists the offices."},
	{"Page three holds the secret:", "the code is 7041 for the vault."},
	{},
	{"Page five ends it."},
})

const page = `<!DOCTYPE html><html><head><title>Ignored title</title>
<style>body { color: red }</style><script>var secret = "in a script";</script></head>
<body><nav><a href="/">Home</a> <a href="/x">Menu link</a></nav>
<h1>Handbook</h1><p>Welcome   to
 the <b>handbook</b> &amp; guide.</p>
<h2>Install</h2><ul><li>first step</li><li>second <i>step</i></li></ul>
<h3>Linux</h3><div><p>The Linux port is 8443.</p></div>
<h2>Ports</h2><table><tr><th>service</th><th>port</th></tr><tr><td>web</td><td>8080</td></tr></table>
<pre>  indented
    code</pre></body></html>`

const guide = `# Relaybot guide

Relaybot answers in your chats.

## Install

Pick your system below.

### Linux

Run the installer with sudo; the secret word is heliotrope.

### Windows

Double-click the installer.

Setext heading
==============

Under the setext heading.

` + "```sh\n# not a heading, a comment\necho hi\n```\n"

// A fact is found in a chunk that says where it is: its heading path, its page.
func TestReadFindsAFactWithItsPlace(t *testing.T) {
	latin1, _ := charmap.Windows1252.NewEncoder().String("Première ligne.\n\nLe mot secret est héliotrope.")
	cyrillic, _ := charmap.Windows1251.NewEncoder().String(`<html><head><meta charset="windows-1251"></head><body><h1>Справка</h1><p>Пароль: гелиотроп.</p></body></html>`)
	for _, tc := range []struct {
		name     string
		file     string
		data     string
		format   extract.Format
		fact     string
		headings []string
		page     int
	}{
		{"pdf page", "report.pdf", string(report), extract.PDF, "the code is 7041", nil, 3},
		{"markdown heading path", "guide.md", guide, extract.Markdown, "heliotrope", []string{"Relaybot guide", "Install", "Linux"}, 0},
		{"markdown without a title", "install.md", "Intro.\n\n## Install\n\n### Linux\n\nUse apt; the key is 0xBEEF.\n", extract.Markdown, "0xBEEF", []string{"Install", "Linux"}, 0},
		{"markdown front matter is no heading", "post.md", "---\ntitle: Post\ntags: [a]\n---\nThe body has 42 words.\n", extract.Markdown, "42 words", nil, 0},
		{"markdown setext heading", "guide.md", guide, extract.Markdown, "Under the setext", []string{"Setext heading"}, 0},
		{"a hash in a code block is code", "guide.md", guide, extract.Markdown, "# not a heading", []string{"Setext heading"}, 0},
		{"html heading path", "page.html", page, extract.HTML, "The Linux port is 8443.", []string{"Handbook", "Install", "Linux"}, 0},
		{"html table as text", "page.html", page, extract.HTML, "web | 8080", []string{"Handbook", "Ports"}, 0},
		{"html list items", "page.html", page, extract.HTML, "- first step\n- second step", []string{"Handbook", "Install"}, 0},
		{"html in the charset its meta tag names", "ru.html", cyrillic, extract.HTML, "Пароль: гелиотроп.", []string{"Справка"}, 0},
		{"text in windows-1252", "notes.txt", latin1, extract.Text, "héliotrope", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := read(t, tc.file, []byte(tc.data), extract.Limits{}, extract.ChunkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Format != tc.format || doc.Name != tc.file {
				t.Fatalf("read as %q named %q, want %q", doc.Format, doc.Name, tc.format)
			}
			checkChunks(t, doc, extract.ChunkOptions{})
			i := slices.IndexFunc(doc.Chunks, func(c extract.Chunk) bool { return strings.Contains(c.Text, tc.fact) })
			if i < 0 {
				t.Fatalf("no chunk says %q: %+v", tc.fact, doc.Chunks)
			}
			if c := doc.Chunks[i]; !slices.Equal(c.Headings, tc.headings) || c.Page != tc.page {
				t.Fatalf("the chunk saying %q is under %q page %d, want %q page %d", tc.fact, c.Headings, c.Page, tc.headings, tc.page)
			}
		})
	}
}

// An HTML page's text is what a reader sees: no script, style, navigation or title; white
// space collapsed but in a pre; entities decoded.
func TestHTMLTextIsTheVisibleText(t *testing.T) {
	doc, err := read(t, "page.html", []byte(page), extract.Limits{}, extract.ChunkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, doc, extract.ChunkOptions{})
	for _, gone := range []string{"Ignored title", "color: red", "in a script", "Menu link"} {
		if strings.Contains(doc.Text, gone) {
			t.Errorf("the text has %q: %q", gone, doc.Text)
		}
	}
	for _, kept := range []string{"Handbook\n\nWelcome to the handbook & guide.", "service | port\nweb | 8080", "  indented\n    code"} {
		if !strings.Contains(doc.Text, kept) {
			t.Errorf("the text lacks %q: %q", kept, doc.Text)
		}
	}
}

// A CSV is chunked by whole rows, the header line at the top of every chunk; a row with a
// line end in a quoted field stays whole; a row longer than the target is a chunk of its own.
func TestCSVRowsStayWholeUnderTheirHeader(t *testing.T) {
	for _, tc := range []struct {
		name, sep string
	}{{"rows.csv", ","}, {"rows.csv", ";"}, {"rows.tsv", "\t"}} {
		t.Run(tc.name+" "+tc.sep, func(t *testing.T) {
			var b strings.Builder
			header := strings.Join([]string{"sku", "name", "price"}, tc.sep)
			rows := []string{header}
			for i := range 60 {
				row := strings.Join([]string{fmt.Sprintf("SKU-%03d", i), fmt.Sprintf("widget number %d", i), fmt.Sprintf("%d.99", i)}, tc.sep)
				switch i {
				case 17:
					row = strings.Join([]string{"SKU-017", "\"a widget\nover two lines\"", "17.99"}, tc.sep)
				case 40:
					row = strings.Join([]string{"SKU-040", strings.Repeat("long ", 100), "40.99"}, tc.sep)
				}
				rows = append(rows, row)
			}
			b.WriteString(strings.Join(rows, "\r\n"))
			o := extract.ChunkOptions{TargetChars: 200, OverlapChars: 40}
			doc, err := read(t, tc.name, []byte(b.String()), extract.Limits{}, o)
			if err != nil {
				t.Fatal(err)
			}
			checkChunks(t, doc, o)
			seen := map[string]bool{}
			for i, c := range doc.Chunks {
				body, ok := strings.CutPrefix(c.Text, header+"\n")
				if !ok {
					t.Fatalf("chunk %d does not start with the header: %q", i, c.Text)
				}
				if i == 0 {
					body = c.Text
				}
				n := 0
				for _, row := range rows {
					if strings.Contains("\n"+body+"\n", "\n"+row+"\n") {
						seen[row] = true
						n++
					}
				}
				if strings.Count(body, "SKU-")+strings.Count(body, "sku") != n {
					t.Fatalf("chunk %d holds a part of a row: %q", i, body)
				}
				if utf8.RuneCountInString(c.Text) > o.TargetChars && n > 1+boolInt(i == 0) {
					t.Fatalf("chunk %d is %d characters with %d rows, over the target", i, utf8.RuneCountInString(c.Text), n)
				}
			}
			if len(seen) != len(rows) {
				t.Fatalf("%d of %d rows are whole in a chunk", len(seen), len(rows))
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Each section of a Markdown file is its own chunk, its heading's line first, even when the
// whole file would fit in one.
func TestMarkdownChunksStopAtHeadings(t *testing.T) {
	doc, err := read(t, "guide.md", []byte(guide), extract.Limits{}, extract.ChunkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range doc.Chunks {
		got = append(got, strings.Join(c.Headings, " > ")+": "+strings.SplitN(c.Text, "\n", 2)[0])
	}
	want := []string{
		"Relaybot guide: # Relaybot guide",
		"Relaybot guide > Install: ## Install",
		"Relaybot guide > Install > Linux: ### Linux",
		"Relaybot guide > Install > Windows: ### Windows",
		"Setext heading: Setext heading",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("chunks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A long section is cut near the target size at sentence ends, each chunk repeating the end
// of the one before from a sentence start, within the overlap.
func TestLongTextIsCutAtSentencesWithOverlap(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "Sentence number %d tells a small thing about the bot. ", i)
		if i%3 == 2 {
			b.WriteString("\n\n")
		}
	}
	o := extract.ChunkOptions{TargetChars: 400, OverlapChars: 120}
	doc, err := read(t, "long.txt", []byte(b.String()), extract.Limits{}, o)
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, doc, o)
	if len(doc.Chunks) < 20 {
		t.Fatalf("%d chunks of about 400 characters from %d characters", len(doc.Chunks), len(doc.Text))
	}
	overlapped := 0
	for i, c := range doc.Chunks {
		if !strings.HasPrefix(c.Text, "Sentence number ") || !strings.HasSuffix(c.Text, "bot.") {
			t.Fatalf("chunk %d is cut mid-sentence: %q", i, c.Text)
		}
		if i > 0 && c.Start < doc.Chunks[i-1].End {
			overlapped++
		}
		if utf8.RuneCountInString(c.Text) < 200 && i < len(doc.Chunks)-1 {
			t.Fatalf("chunk %d is %d characters, far under the 400 target", i, utf8.RuneCountInString(c.Text))
		}
	}
	if overlapped < len(doc.Chunks)/2 {
		t.Fatalf("only %d of %d chunks repeat the end of the one before", overlapped, len(doc.Chunks))
	}
}

// Text without spaces or sentence ends (a long line of Cyrillic) is cut at rune boundaries,
// never inside a character.
func TestTextWithoutBreaksIsCutBetweenRunes(t *testing.T) {
	text := strings.Repeat("привет", 500) + " и всё"
	o := extract.ChunkOptions{TargetChars: 100, OverlapChars: 30}
	doc, err := read(t, "ru.txt", []byte(text), extract.Limits{}, o)
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, doc, o)
	if len(doc.Chunks) < 30 {
		t.Fatalf("%d chunks of 100 characters from %d characters", len(doc.Chunks), utf8.RuneCountInString(text))
	}
}

// A file over a limit is refused before anything is chunked, saying which limit, its value
// and what the file had.
func TestLimitsRefuseTheFileNamingTheLimit(t *testing.T) {
	big := []byte(strings.Repeat("A line of the handbook.\n", 2000)) // 48,000 bytes
	for _, tc := range []struct {
		name   string
		limits extract.Limits
		key    string
		says   string
	}{
		{"file bytes", extract.Limits{MaxFileBytes: 10 << 10}, "max_file_bytes", "the file has 46 KB, more than knowledge.max_file_bytes (10 KB)"},
		{"text bytes", extract.Limits{MaxTextBytes: 20 << 10}, "max_text_bytes", "more than knowledge.max_text_bytes (20 KB)"},
		{"pdf pages", extract.Limits{MaxPages: 4}, "max_pages", "the PDF has 5 pages, more than knowledge.max_pages (4)"},
		{"pdf text bytes", extract.Limits{MaxTextBytes: 60}, "max_text_bytes", "more than knowledge.max_text_bytes (60 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, data := "handbook.txt", big
			if strings.HasPrefix(tc.name, "pdf") {
				name, data = "report.pdf", report
			}
			doc, err := read(t, name, data, tc.limits, extract.ChunkOptions{})
			var lim *extract.LimitError
			if !errors.As(err, &lim) || lim.Key != tc.key {
				t.Fatalf("Read = %d chunks, %v; want the %s limit broken", len(doc.Chunks), err, tc.key)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("the refusal says %q, want %q", err, tc.says)
			}
			if len(doc.Chunks) != 0 {
				t.Fatalf("a refused file yielded %d chunks", len(doc.Chunks))
			}
		})
	}
}

func TestUnknownAndBinaryFilesAreRefused(t *testing.T) {
	for name, data := range map[string][]byte{
		"slides.pptx": []byte("PK\x03\x04\x14\x00\x00\x00"),
		"binary.txt":  {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 3, 0},
	} {
		doc, err := read(t, name, data, extract.Limits{}, extract.ChunkOptions{})
		if !errors.Is(err, extract.ErrUnknownFormat) || len(doc.Chunks) != 0 {
			t.Errorf("%s: %d chunks, %v; want it refused as an unknown format", name, len(doc.Chunks), err)
		}
	}
}

// Every chunk of a PDF is of one page, knows it, and a 300-page PDF reads within the limits
// telling its progress page by page.
func TestPDFChunksKeepToTheirPageAndProgressIsTold(t *testing.T) {
	pages := make([][]string, 300)
	for i := range pages {
		for j := range 12 {
			pages[i] = append(pages[i], fmt.Sprintf("Page %d line %d of the handbook, with some words to fill it.", i+1, j+1))
		}
	}
	var told []int
	doc, err := extract.Read(context.Background(), "handbook.pdf", bytes.NewReader(files.PDF(pages)), extract.Limits{MaxPages: 300}, extract.ChunkOptions{TargetChars: 500},
		func(stage string, done, total int) {
			if stage == "pages" && total == 300 {
				told = append(told, done)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Pages != 300 || len(told) != 300 || told[0] != 1 || told[299] != 300 {
		t.Fatalf("read %d pages, progress told %d times (%v...)", doc.Pages, len(told), told[:min(len(told), 3)])
	}
	checkChunks(t, doc, extract.ChunkOptions{TargetChars: 500})
	for i, c := range doc.Chunks {
		if c.Page < 1 || !strings.HasPrefix(c.Text, fmt.Sprintf("Page %d line", c.Page)) && !strings.Contains(c.Text, fmt.Sprintf("Page %d line", c.Page)) {
			t.Fatalf("chunk %d says page %d: %q", i, c.Page, c.Text)
		}
		if strings.Count(c.Text, "Page ") != strings.Count(c.Text, fmt.Sprintf("Page %d line", c.Page)) {
			t.Fatalf("chunk %d on page %d holds another page's lines: %q", i, c.Page, c.Text)
		}
	}
}

// A hostile PDF is a refused document and the caller lives on: one that kills the reader is
// an error, one that declares two billion pages breaks max_pages, saying so.
func TestHostilePDFsAreRefused(t *testing.T) {
	for name, data := range files.HostilePDFs() {
		t.Run(name, func(t *testing.T) {
			doc, err := read(t, name+".pdf", data, extract.Limits{Timeout: 10 * time.Second}, extract.ChunkOptions{})
			if err == nil {
				t.Fatalf("a hostile PDF read as %d chunks", len(doc.Chunks))
			}
			var lim *extract.LimitError
			if name == "huge count" && (!errors.As(err, &lim) || lim.Key != "max_pages" || lim.Got != 2147483647) {
				t.Fatalf("a PDF of 2^31 pages: %v, want max_pages broken", err)
			}
			t.Log(err)
		})
	}
}

// A read whose context is cancelled (the upload abandoned) ends with the context's error.
func TestCancelledReadEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := extract.Read(ctx, "a.md", strings.NewReader("# A\n\nbody"), extract.Limits{}, extract.ChunkOptions{}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled read returned %v", err)
	}
}

// The reader stops reading an endless upload at the file limit (and counts what follows only
// up to a bound, saying "at least").
func TestEndlessUploadIsCutAtTheLimit(t *testing.T) {
	_, err := extract.Read(context.Background(), "a.txt", endless{}, extract.Limits{MaxFileBytes: 1 << 20}, extract.ChunkOptions{}, nil)
	var lim *extract.LimitError
	if !errors.As(err, &lim) || lim.Key != "max_file_bytes" || !lim.AtLeast || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("an endless upload: %v", err)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

var _ io.Reader = endless{}

// checkChunks fails t unless doc's chunks keep the package's contract: each indexes Text (the
// span trimmed, on rune boundaries, its Text the span or a CSV header then the span), within
// the target size (but a CSV row), each starting after the one before, repeating at most the
// overlap of it, and together covering every non-space character of Text.
func checkChunks(t testing.TB, doc extract.Document, o extract.ChunkOptions) {
	t.Helper()
	if o.TargetChars <= 0 {
		o.TargetChars = extract.DefaultTargetChars
	}
	if o.OverlapChars <= 0 {
		o.OverlapChars = extract.DefaultOverlapChars
	}
	o.OverlapChars = min(o.OverlapChars, o.TargetChars/2)
	covered := 0
	for i, c := range doc.Chunks {
		if c.Start < 0 || c.End > len(doc.Text) || c.Start >= c.End {
			t.Fatalf("chunk %d spans [%d:%d] of %d bytes", i, c.Start, c.End, len(doc.Text))
		}
		span := doc.Text[c.Start:c.End]
		if !utf8.RuneStart(doc.Text[c.Start]) || c.End < len(doc.Text) && !utf8.RuneStart(doc.Text[c.End]) {
			t.Fatalf("chunk %d [%d:%d] cuts a character", i, c.Start, c.End)
		}
		if strings.TrimSpace(span) != span {
			t.Fatalf("chunk %d's span %q has white space at an end", i, span)
		}
		if c.Text != span && !(doc.Format == extract.CSV && strings.HasSuffix(c.Text, "\n"+span)) {
			t.Fatalf("chunk %d's text %q is not Text[%d:%d] = %q", i, c.Text, c.Start, c.End, span)
		}
		if n := utf8.RuneCountInString(c.Text); n > o.TargetChars && doc.Format != extract.CSV {
			t.Fatalf("chunk %d has %d characters, over the target %d", i, n, o.TargetChars)
		}
		if i > 0 {
			prev := doc.Chunks[i-1]
			if c.Start <= prev.Start {
				t.Fatalf("chunk %d starts at %d, not after chunk %d at %d", i, c.Start, i-1, prev.Start)
			}
			if c.Start < prev.End {
				if n := utf8.RuneCountInString(doc.Text[c.Start:prev.End]); n > o.OverlapChars {
					t.Fatalf("chunk %d repeats %d characters of the one before, over the overlap %d", i, n, o.OverlapChars)
				}
				if c.Page != prev.Page || !slices.Equal(c.Headings, prev.Headings) {
					t.Fatalf("chunk %d overlaps the one before across a section", i)
				}
			}
		}
		for p, r := range doc.Text[min(covered, c.Start):c.Start] {
			if !unicode.IsSpace(r) {
				t.Fatalf("%q at %d is in no chunk", doc.Text[covered+p:min(len(doc.Text), covered+p+40)], covered+p)
			}
		}
		covered = max(covered, c.End)
	}
	if rest := doc.Text[covered:]; strings.TrimSpace(rest) != "" {
		t.Fatalf("the end of the text %q is in no chunk", rest[:min(len(rest), 80)])
	}
}
