// Package extract turns a document an admin uploads for a knowledge base (bytes nobody has
// checked) into its text and structured chunks: Markdown and HTML by headings and paragraphs,
// each chunk with its heading path; PDFs by page, a chunk never crossing a page; CSV by whole
// rows with the header repeated; plain text by paragraphs. Every read is bounded: the file's
// bytes, a PDF's pages, the text extracted and the wall clock, each a limit an admin sets;
// PDFs are parsed in the reader process of media/sandbox, as attachments are.
//
// A chunk's Start and End index Document.Text: Text[Start:End] is the chunk's span, with no
// white space at either end. Chunk.Text is that span, except for a CSV chunk that does not
// begin with the header row: its Text is the header line, a newline, then the span.
package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// Format is the kind of a document.
type Format string

// The formats a knowledge base reads.
const (
	PDF      Format = "pdf"
	Markdown Format = "markdown"
	Text     Format = "text"
	HTML     Format = "html"
	CSV      Format = "csv"
)

// Limits bound reading one document. Zero values take the defaults below.
type Limits struct {
	// MaxFileBytes is the most bytes the file may have (knowledge.max_file_bytes).
	MaxFileBytes int64
	// MaxPages is the most pages a PDF may have (knowledge.max_pages).
	MaxPages int
	// MaxTextBytes is the most bytes of text the document may yield (knowledge.max_text_bytes).
	MaxTextBytes int64
	// Timeout is the most wall-clock time reading one document may take.
	Timeout time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxFileBytes = 32 << 20
	DefaultMaxPages     = 2000
	DefaultMaxTextBytes = 16 << 20
	DefaultTimeout      = 2 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultMaxPages
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = DefaultMaxTextBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

// ChunkOptions size the chunks. Zero values take the defaults.
type ChunkOptions struct {
	// TargetChars is the most characters (runes) a chunk holds, unless one unit that cannot be
	// cut (a CSV row) is longer.
	TargetChars int
	// OverlapChars is the most characters a chunk repeats from the end of the one before it in
	// the same section (page, heading path); at most half of TargetChars.
	OverlapChars int
}

// Defaults of ChunkOptions.
const (
	DefaultTargetChars  = 1200
	DefaultOverlapChars = 150
)

func (o ChunkOptions) withDefaults() ChunkOptions {
	if o.TargetChars <= 0 {
		o.TargetChars = DefaultTargetChars
	}
	if o.OverlapChars < 0 {
		o.OverlapChars = 0
	} else if o.OverlapChars == 0 {
		o.OverlapChars = min(DefaultOverlapChars, o.TargetChars/2)
	}
	o.OverlapChars = min(o.OverlapChars, o.TargetChars/2)
	return o
}

// Chunk is a piece of a document sized for retrieval.
type Chunk struct {
	// Text is what the chunk says: Document.Text[Start:End], with a CSV header line before it
	// when the span does not begin with the header row.
	Text string
	// Page is the 1-based page of a PDF chunk; 0 when the format has no pages.
	Page int
	// Headings is the heading path of the section the chunk is in (Markdown, HTML), outermost
	// first; nil when none.
	Headings []string
	// Start and End are the byte offsets of the chunk's span in Document.Text.
	Start, End int
}

// Document is a document read and chunked.
type Document struct {
	// Name is the file's name as given to Read.
	Name   string
	Format Format
	// Pages is a PDF's page count; 0 for the other formats.
	Pages int
	// Text is the document's text in UTF-8: a Markdown, text or CSV file's own text (line ends
	// made "\n"), an HTML page's visible text, a PDF's pages separated by a blank line.
	Text   string
	Chunks []Chunk
}

// LimitError is the error of a document refused for breaking a limit.
type LimitError struct {
	// Key is the limit's key under [knowledge]: "max_file_bytes", "max_pages" or
	// "max_text_bytes".
	Key string
	// Limit is the limit's value; Got is what the document had (bytes or pages).
	Limit, Got int64
	// AtLeast says Got is a floor: reading stopped once the limit was broken.
	AtLeast bool
}

func (e *LimitError) Error() string {
	had := ""
	if e.AtLeast {
		had = "at least "
	}
	switch e.Key {
	case "max_pages":
		return fmt.Sprintf("the PDF has %s%d pages, more than knowledge.max_pages (%d)", had, e.Got, e.Limit)
	case "max_text_bytes":
		return fmt.Sprintf("the document holds %s%s of text, more than knowledge.max_text_bytes (%s)", had, size(e.Got), size(e.Limit))
	}
	return fmt.Sprintf("the file has %s%s, more than knowledge.%s (%s)", had, size(e.Got), e.Key, size(e.Limit))
}

// size writes n bytes the way an admin reads them.
func size(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// formats are the formats Read reads, in the order ErrUnknownFormat names them, with their
// file name extensions.
var formats = []struct {
	format Format
	name   string
	exts   []string
}{
	{PDF, "PDF (.pdf)", []string{".pdf"}},
	{Markdown, "Markdown (.md)", []string{".md", ".markdown", ".mdown", ".mkd"}},
	{Text, "plain text (.txt)", []string{".txt", ".text"}},
	{HTML, "HTML (.html)", []string{".html", ".htm", ".xhtml"}},
	{CSV, "CSV (.csv, .tsv)", []string{".csv", ".tsv"}},
}

// ErrUnknownFormat is the error of a file that is none of the formats Read reads.
var ErrUnknownFormat = errors.New("knowledge bases read " + formatNames() + " files")

func formatNames() string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// sniffBytes is how much of the head Detect looks at.
const sniffBytes = 1024

// Detect names a file's format from its name's extension and its first bytes (a PDF is one by
// its magic bytes whatever its name; a page without a known extension is HTML by its doctype
// or html tag). A file it cannot name is an error wrapping ErrUnknownFormat. head may be
// empty, to check a name alone.
func Detect(name string, head []byte) (Format, error) {
	head = head[:min(len(head), sniffBytes)]
	if bytes.Contains(head, []byte("%PDF-")) {
		return PDF, nil
	}
	ext := strings.ToLower(path.Ext(strings.ReplaceAll(name, `\`, "/")))
	for _, f := range formats {
		for _, e := range f.exts {
			if ext != e {
				continue
			}
			if f.format == PDF && len(head) > 0 {
				return "", fmt.Errorf("%s is named a PDF but is not one: %w", name, ErrUnknownFormat)
			}
			return f.format, nil
		}
	}
	if looksHTML(head) {
		return HTML, nil
	}
	what := ext
	if what == "" {
		what = "a file without an extension"
	}
	return "", fmt.Errorf("cannot read %s: %w", what, ErrUnknownFormat)
}

// looksHTML reports whether head starts (after a byte-order mark and white space) with an
// HTML doctype or html tag.
func looksHTML(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte{0xEF, 0xBB, 0xBF})
	head = bytes.ToLower(bytes.TrimLeft(head, " \t\r\n"))
	return bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html"))
}

// Progress is told how far a long read is: a stage ("pages" while a PDF is parsed, "chunks"
// once the document is chunked), how much of it is done and its total. Read calls it in order,
// from one goroutine at a time (not always the caller's), and never after Read returns; it
// must not block.
type Progress func(stage string, done, total int)

// Read reads a document from r under l and chunks it by o. A file over a limit is a
// *LimitError, returned before any chunk; a file of a format Read does not read wraps
// ErrUnknownFormat. PDFs are parsed in a reader process (media/sandbox): the binary must call
// sandbox.Main first thing in main, and a test binary in TestMain. Cancelling ctx, or l.Timeout
// passing, ends the read with an error.
func Read(ctx context.Context, name string, r io.Reader, l Limits, o ChunkOptions, p Progress) (Document, error) {
	l, o = l.withDefaults(), o.withDefaults()
	if p == nil {
		p = func(string, int, int) {}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, l.Timeout, fmt.Errorf("reading %s took more than %s: %w", name, l.Timeout, context.DeadlineExceeded))
	defer cancel()
	data, err := readAll(ctx, r, l.MaxFileBytes)
	if err != nil {
		return Document{}, err
	}
	format, err := Detect(name, data)
	if err != nil {
		return Document{}, err
	}
	doc := Document{Name: name, Format: format}
	var blocks []block
	switch format {
	case PDF:
		doc.Text, doc.Pages, blocks, err = readPDF(ctx, name, data, l, p)
	default:
		doc.Text, blocks, err = readText(ctx, name, format, data, l)
	}
	if err != nil {
		return Document{}, err
	}
	if err := context.Cause(ctx); ctx.Err() != nil {
		return Document{}, err
	}
	doc.Chunks = chunk(doc.Text, blocks, o)
	p("chunks", len(doc.Chunks), len(doc.Chunks))
	return doc, nil
}

// readAll reads r to its end, refusing it once it holds more than max bytes. The bytes past
// the limit are counted (not kept) up to a bound, so the error can say how big the file was.
func readAll(ctx context.Context, r io.Reader, max int64) ([]byte, error) {
	r = ctxReader{ctx, r}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading the file: %w", err)
	}
	if int64(len(data)) <= max {
		return data, nil
	}
	countUpTo := min(16*max, 256<<20)
	rest, err := io.Copy(io.Discard, io.LimitReader(r, countUpTo))
	return nil, &LimitError{Key: "max_file_bytes", Limit: max, Got: int64(len(data)) + rest, AtLeast: err != nil || rest == countUpTo}
}

// ctxReader is a reader that fails once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}
