package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"relaybot/media"
)

// pageLine is one line a reader process writes for a pages job: a page as it is read, or (with
// Result set) the end of the read.
type pageLine struct {
	Page   int     `json:"page,omitempty"`
	Of     int     `json:"of,omitempty"`
	Text   string  `json:"text,omitempty"`
	Result *result `json:"result,omitempty"`
}

// ReadPages reads a PDF's text layer page by page in a reader process, as media.ReadPDFPages
// does, calling page for each page (its number from 1, the page count, its text) in order as the
// reader gets to it, and returns the page count. page is called from another goroutine than the
// caller's, never after ReadPages returns; an error it returns stops the reader and is
// ReadPages' error. A PDF over the pages limit is a *media.LimitError with Pages set; one that
// breaks another limit, or that the reader dies of, a *media.LimitError; a PDF with no text on
// any page media.ErrNoText.
func (r *Reader) ReadPages(ctx context.Context, name string, data []byte, page func(n, of int, text string) error) (int, error) {
	sink := &pageSink{max: r.limits.Output + 64<<10, page: page}
	err := r.exec(ctx, job{Kind: kindPages, Name: name, MIME: "application/pdf"}, data, sink, func() bool { return sink.over })
	switch {
	case sink.err != nil:
		return 0, sink.err
	case err != nil:
		return 0, err
	case sink.res == nil:
		// The binary ran without serving the job: it does not call Main first thing.
		return 0, fmt.Errorf("sandbox: the reader ended without a result (does the binary call sandbox.Main first thing?)")
	}
	res := sink.res
	switch {
	case res.Limit != "":
		return 0, &media.LimitError{What: res.Limit, Pages: res.OverPages}
	case res.NoText:
		return 0, media.ErrNoText
	case res.Err != "":
		return 0, errors.New(res.Err)
	}
	return res.Pages, nil
}

// pageSink is the stdout of a pages job: it hands each line to page as it comes, and keeps no
// more than a line at a time and no more than max bytes in all.
type pageSink struct {
	max, total int64
	line       []byte
	page       func(n, of int, text string) error
	res        *result
	over       bool
	err        error // page's, or the reader's answer's
}

func (s *pageSink) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.total += int64(len(p)); s.total > s.max {
		s.over = true
		return 0, errors.New("sandbox: the reader wrote more than its output cap")
	}
	for rest := p; len(rest) > 0; {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		s.line = append(s.line, line...)
		if !ok {
			break
		}
		if s.err = s.handle(s.line); s.err != nil {
			return 0, s.err
		}
		s.line, rest = s.line[:0], after
	}
	return len(p), nil
}

// handle takes one whole line.
func (s *pageSink) handle(line []byte) error {
	var l pageLine
	if err := json.Unmarshal(line, &l); err != nil || s.res != nil {
		return fmt.Errorf("sandbox: the reader answered %q", firstLine(line))
	}
	if l.Result != nil {
		s.res = l.Result
		return nil
	}
	return s.page(l.Page, l.Of, l.Text)
}

// servePages reads a PDF page by page, writing each page as a line and flushing it, then the
// result's line.
func servePages(j job, data []byte, out io.Writer) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	written := int64(0)
	pages, err := media.ReadPDFPages(data, media.Limits{Pages: j.Limits.Pages, Inflated: j.Limits.Inflated}, func(n, of int, text string) error {
		if written += int64(len(text)); written > j.Limits.Output {
			return &media.LimitError{What: fmt.Sprintf("more than %d MB of text", j.Limits.Output>>20)}
		}
		if err := enc.Encode(pageLine{Page: n, Of: of, Text: text}); err != nil {
			return err
		}
		return w.Flush()
	})
	var res result
	var limit *media.LimitError
	switch {
	case errors.As(err, &limit):
		res = result{Limit: limit.What, OverPages: limit.Pages}
	case err != nil:
		res = result{Err: err.Error()}
	case written == 0:
		res = result{NoText: true}
	default:
		res = result{Format: media.FormatPDF, Pages: pages}
	}
	if err := enc.Encode(pageLine{Result: &res}); err != nil {
		return err
	}
	return w.Flush()
}
