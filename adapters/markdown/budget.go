package markdown

import (
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// maxDelimiters bounds the emphasis and link markers goldmark matches in one paragraph. Its
// matching compares every closer with the openers before it (no "openers bottom"), and each
// "](" scans ahead for the end of a destination, so a hostile line of unmatched markers costs
// the square of its length. Past the budget a marker is an ordinary character: the cost is at
// most maxDelimiters per byte, and no real reply comes near the limit.
const maxDelimiters = 256

// budgetKey keeps a paragraph's count of markers in the parser's context.
var budgetKey = parser.NewContextKey()

type budget struct {
	block ast.Node // the paragraph being counted
	n     int
}

// delimiterBudget runs before goldmark's emphasis, strikethrough and link parsers on their
// trigger characters: within the budget it declines (they parse as usual), past it it takes
// the whole run of the character as text.
type delimiterBudget struct{}

func (delimiterBudget) Trigger() []byte { return []byte{'*', '_', '~', '[', ']', '!'} }

func (delimiterBudget) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	b, _ := pc.Get(budgetKey).(*budget)
	switch {
	case b == nil:
		b = &budget{block: parent}
		pc.Set(budgetKey, b)
	case b.block != parent: // the next paragraph: its own count, in the same budget
		*b = budget{block: parent}
	}
	b.n++
	if b.n <= maxDelimiters {
		return nil
	}
	line, seg := block.PeekLine()
	if len(line) == 0 {
		return nil
	}
	n := 1
	for n < len(line) && line[n] == line[0] {
		n++
	}
	block.Advance(n)
	return ast.NewTextSegment(text.NewSegment(seg.Start, seg.Start+n))
}
