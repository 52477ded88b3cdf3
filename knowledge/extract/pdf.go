package extract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"relaybot/media"
	"relaybot/media/sandbox"
)

// readPDF parses a PDF in a reader process (media/sandbox: a memory cap, CPU and wall-clock
// deadlines, the pages and inflated bytes checked before the library starts), page by page,
// telling p each page. Its text is the pages' texts separated by blank lines; each page is its
// own section, so no chunk crosses a page.
func readPDF(ctx context.Context, name string, data []byte, l Limits, p Progress) (string, int, []block, error) {
	r, err := sandbox.New(sandbox.Limits{
		// A page tree that loops burns processor time until a cap stops it; a real 300-page PDF
		// takes about a second (docs/performance/2026-12-07-kbextract.md).
		CPU:  min(l.Timeout, time.Minute),
		Wall: l.Timeout,
		// The reader's own cap on text stops a runaway page; Read's own (max_text_bytes) is
		// checked as the pages come, with room for JSON's escapes in between.
		Output:     4*l.MaxTextBytes + 1<<20,
		Pages:      l.MaxPages,
		Concurrent: 1,
	})
	if err != nil {
		return "", 0, nil, err
	}
	var text strings.Builder
	var blocks []block
	pages, err := r.ReadPages(ctx, name, data, func(n, of int, page string) error {
		if page != "" {
			if text.Len() > 0 {
				text.WriteString("\n\n")
			}
			if int64(text.Len()+len(page)) > l.MaxTextBytes {
				return &LimitError{Key: "max_text_bytes", Limit: l.MaxTextBytes, Got: int64(text.Len() + len(page)), AtLeast: n < of}
			}
			start := text.Len()
			text.WriteString(page)
			blocks = paragraphs(blocks, text.String(), start, text.Len(), block{section: n, page: n})
		}
		p("pages", n, of)
		return nil
	})
	var lim *media.LimitError
	var mine *LimitError
	switch {
	case err == nil:
	case errors.As(err, &mine), ctx.Err() != nil:
		return "", 0, nil, err
	case errors.As(err, &lim) && lim.Pages > 0:
		return "", 0, nil, &LimitError{Key: "max_pages", Limit: int64(l.MaxPages), Got: int64(lim.Pages)}
	default:
		return "", 0, nil, fmt.Errorf("%s: %w", name, err)
	}
	return text.String(), pages, blocks, nil
}
