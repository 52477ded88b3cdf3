// Package files makes real files for tests: a PDF with a text layer (one Helvetica page per
// entry, written as PDF 1.4 with an xref table, as any viewer reads it) and an OGG/Opus voice
// note (an OpusHead and OpusTags page, then pages of 20 ms Opus packets, CRC-checked like every
// OGG page).
package files

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// PDF returns a PDF whose page i shows the lines of pages[i].
func PDF(pages [][]string) []byte {
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	// 1: catalog, 2: pages, 3: font, then a page and its content per page.
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, lines := range pages {
		var c strings.Builder
		c.WriteString("BT /F1 11 Tf 14 TL 56 790 Td\n")
		for _, l := range lines {
			fmt.Fprintf(&c, "(%s) Tj T*\n", escape(l))
		}
		c.WriteString("ET")
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i))
		obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", c.Len(), c.String()))
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return b.Bytes()
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(s)
}

// OggOpus returns an OGG/Opus recording of d of silence (20 ms CELT frames), as Telegram
// voice notes and OpenAI's response_format "opus" are.
func OggOpus(d time.Duration) []byte {
	const serial = 0x52454c41
	var b bytes.Buffer
	seq := uint32(0)
	page := func(headerType byte, granule uint64, packets [][]byte) {
		var segs []byte
		var body []byte
		for _, p := range packets {
			n := len(p)
			for n >= 255 {
				segs = append(segs, 255)
				n -= 255
			}
			segs = append(segs, byte(n))
			body = append(body, p...)
		}
		h := make([]byte, 27, 27+len(segs))
		copy(h, "OggS")
		h[5] = headerType
		binary.LittleEndian.PutUint64(h[6:], granule)
		binary.LittleEndian.PutUint32(h[14:], serial)
		binary.LittleEndian.PutUint32(h[18:], seq)
		h[26] = byte(len(segs))
		h = append(h, segs...)
		pg := append(h, body...)
		binary.LittleEndian.PutUint32(pg[22:], OggCRC(pg))
		b.Write(pg)
		seq++
	}
	head := []byte("OpusHead")
	head = append(head, 1, 1) // version, one channel
	head = binary.LittleEndian.AppendUint16(head, 312)
	head = binary.LittleEndian.AppendUint32(head, 48000)
	head = append(head, 0, 0, 0) // gain, mapping family
	page(2, 0, [][]byte{head})
	tags := []byte("OpusTags")
	tags = binary.LittleEndian.AppendUint32(tags, 8)
	tags = append(tags, "relaybot"...)
	tags = binary.LittleEndian.AppendUint32(tags, 0)
	page(0, 0, [][]byte{tags})
	frames := int(d / (20 * time.Millisecond))
	silence := []byte{0xF8, 0xFF, 0xFE} // a 20 ms CELT frame of silence
	granule := uint64(312)
	for done := 0; done < frames; {
		n := min(50, frames-done)
		pk := make([][]byte, n)
		for i := range pk {
			pk[i] = silence
		}
		done += n
		granule += uint64(n) * 960
		typ := byte(0)
		if done == frames {
			typ = 4
		}
		page(typ, granule, pk)
	}
	return b.Bytes()
}

// OggCRC is the CRC-32 of an OGG page (polynomial 0x04C11DB7, not reflected, initial 0), taken
// with the checksum field zero.
func OggCRC(page []byte) uint32 {
	var crc uint32
	for i, c := range page {
		if i >= 22 && i < 26 {
			c = 0
		}
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04C11DB7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// CheckOgg reports why data is not a well-formed OGG stream (magic, page headers, checksums),
// or nil when it is.
func CheckOgg(data []byte) error {
	if !bytes.HasPrefix(data, []byte("OggS")) {
		return fmt.Errorf("no OggS magic at the start (%q)", data[:min(len(data), 4)])
	}
	for off, n := 0, 0; off < len(data); n++ {
		if len(data)-off < 27 || string(data[off:off+4]) != "OggS" {
			return fmt.Errorf("page %d at byte %d: no OggS header", n, off)
		}
		segs := int(data[off+26])
		if len(data)-off < 27+segs {
			return fmt.Errorf("page %d: segment table cut", n)
		}
		size := 27 + segs
		for _, s := range data[off+27 : off+27+segs] {
			size += int(s)
		}
		if len(data)-off < size {
			return fmt.Errorf("page %d: body cut", n)
		}
		pg := data[off : off+size]
		if got, want := binary.LittleEndian.Uint32(pg[22:]), OggCRC(pg); got != want {
			return fmt.Errorf("page %d: checksum %08x, want %08x", n, got, want)
		}
		off += size
	}
	return nil
}
