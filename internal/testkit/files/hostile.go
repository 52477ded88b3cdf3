package files

import (
	"bytes"
	"compress/zlib"
	"fmt"
)

// The hostile PDFs of issue 36, each a few hundred bytes, each a different way to take down
// or hold a reader that has no limits.
//
// CrashPDF is the reproduction: an xref subsection starting at object 2^35, which
// makes github.com/ledongthuc/pdf allocate a TiB (a Go fatal error, which recover cannot
// catch). It is the bytes of
//
//	python3 -c 'h=b"%PDF-1.4\n%"+b"x"*100+b"\n"; open("crash.pdf","wb").write(h+b"xref\n34359738368 1\n0000000000 00000 n \ntrailer\n<< /Size 1 >>\nstartxref\n%d\n%%%%EOF\n"%len(h))'
func CrashPDF() []byte {
	h := "%PDF-1.4\n%" + string(bytes.Repeat([]byte("x"), 100)) + "\n"
	return fmt.Appendf([]byte(h), "xref\n34359738368 1\n0000000000 00000 n \ntrailer\n<< /Size 1 >>\nstartxref\n%d\n%%%%EOF\n", len(h))
}

// KidsLoopPDF is a PDF whose page tree lists itself among its kids: a reader walking it
// never ends.
func KidsLoopPDF() []byte {
	return objectsPDF("<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>")
}

// HugeCountPDF is a PDF of one page that declares 2147483647.
func HugeCountPDF() []byte {
	return objectsPDF("<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 2147483647 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>")
}

// FlateBombPDF is a PDF of one page whose content stream inflates to n bytes of zeros (a
// thousand times its compressed size).
func FlateBombPDF(n int) []byte {
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(zeros) {
		w.Write(zeros[:min(left, len(zeros))])
	}
	w.Close()
	return objectsPDF("<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()))
}

// TextBombPDF is a PDF of one page whose compressed content stream shows glyphs one-letter
// strings: a few hundred KB that a PDF library turns into GBs of glyph records.
func TextBombPDF(glyphs int) []byte {
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
	w.Write([]byte("BT /F1 12 Tf 10 10 Td "))
	chunk := bytes.Repeat([]byte("(a) Tj "), 1<<14)
	for left := glyphs; left > 0; left -= 1 << 14 {
		w.Write(chunk[:7*min(left, 1<<14)])
	}
	w.Write([]byte(" ET"))
	w.Close()
	return objectsPDF("<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
}

// XrefStreamPDF is a PDF whose cross-reference stream declares /Size 2^35 and a /Columns
// count as large in its /DecodeParms: the second way to the same fatal allocation.
func XrefStreamPDF() []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	off := b.Len()
	body := []byte{1, 0, 0}
	fmt.Fprintf(&b, "1 0 obj\n<< /Type /XRef /Size 34359738368 /W [1 1 1] /DecodeParms << /Columns 34359738368 /Predictor 12 >> /Length %d >>\nstream\n%s\nendstream\nendobj\n", len(body), body)
	fmt.Fprintf(&b, "startxref\n%d\n%%%%EOF\n", off)
	return b.Bytes()
}

// HostilePDFs are the hostile PDFs by name, for tests and fuzz seeds (the flate bomb at 24 MB,
// over a 16 MB cap and quick to make).
func HostilePDFs() map[string][]byte {
	return map[string][]byte{
		"crash":      CrashPDF(),
		"kids loop":  KidsLoopPDF(),
		"huge count": HugeCountPDF(),
		"flate bomb": FlateBombPDF(24 << 20),
		"xref size":  XrefStreamPDF(),
	}
}

// objectsPDF writes the objects numbered from 1 as a PDF 1.4 with an xref table, object 1 the
// root.
func objectsPDF(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}
