package extract_test

import (
	"testing"

	"relaybot/knowledge/extract"
)

// FuzzMarkdown reads any bytes as a Markdown file: a document whose chunks keep the contract
// (checkChunks), or an error; never a panic.
func FuzzMarkdown(f *testing.F) {
	f.Add([]byte(guide))
	f.Add([]byte("```\n# open fence\n"))
	f.Add([]byte("title\n===\n\n## a ##\n- x\n- y\n\n    # indented code\n"))
	f.Add([]byte("\xef\xbb\xbf# bom\r\n\r\nline"))
	f.Add([]byte("---\ntitle: x\n---\n# After\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := read(t, "f.md", data, extract.Limits{}, extract.ChunkOptions{TargetChars: 60, OverlapChars: 20})
		if err != nil {
			return
		}
		checkChunks(t, doc, extract.ChunkOptions{TargetChars: 60, OverlapChars: 20})
	})
}

// FuzzChunk chunks any text by any target and overlap: the chunks keep the contract.
func FuzzChunk(f *testing.F) {
	f.Add("Sentence one. Sentence two!\n\nA paragraph; then more.", 20, 10)
	f.Add("привет мир。次の文。", 3, 2)
	f.Add("nospacesatallnospacesatall", 5, 4)
	f.Fuzz(func(t *testing.T, text string, target, overlap int) {
		o := extract.ChunkOptions{TargetChars: abs(target%2000) + 1, OverlapChars: abs(overlap % 1000)}
		doc, err := read(t, "f.txt", []byte(text), extract.Limits{}, o)
		if err != nil {
			return
		}
		checkChunks(t, doc, o)
	})
}

func abs(n int) int { return max(n, -n) }

// FuzzHTML reads any bytes as an HTML page: a document whose chunks keep the contract, or an
// error; never a panic.
func FuzzHTML(f *testing.F) {
	f.Add([]byte(page))
	f.Add([]byte("<h2>open heading <p>para</p><nav>never closed"))
	f.Add([]byte("<pre>\r\n  a\r\n</pre><table><td>x<td>y<tr><th>z"))
	f.Add([]byte("<h1></h1><h3>deep</h3>text<script>x</script></h3>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := extract.ChunkOptions{TargetChars: 60, OverlapChars: 20}
		doc, err := read(t, "f.html", data, extract.Limits{}, o)
		if err != nil {
			return
		}
		checkChunks(t, doc, o)
	})
}

// FuzzCSV reads any bytes as a CSV file: a document whose chunks keep the contract (each
// after the first under the header line), or an error; never a panic.
func FuzzCSV(f *testing.F) {
	f.Add([]byte("sku,name\nA,\"x\ny\"\nB,b\nC,c\n"))
	f.Add([]byte("a;b;c\n1;2;3\n\"open quote;4\n5;6"))
	f.Add([]byte("\n\n  ,\n\"\"\"\",\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := extract.ChunkOptions{TargetChars: 40, OverlapChars: 15}
		doc, err := read(t, "f.csv", data, extract.Limits{}, o)
		if err != nil {
			return
		}
		checkChunks(t, doc, o)
	})
}
