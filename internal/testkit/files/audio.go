package files

import (
	"bytes"
	"encoding/binary"
	"time"
)

// WAV returns d of silence as 16-bit mono PCM at 8 kHz.
func WAV(d time.Duration) []byte {
	const rate = 8000
	n := int(d.Seconds()*rate) * 2
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+n))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(rate), uint32(rate * 2), uint16(2), uint16(16)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(n))
	b.Write(make([]byte, n))
	return b.Bytes()
}

// MP3 returns d of MPEG-1 layer III frames at 32 kbit/s, 32 kHz, mono (36 ms, 144 bytes
// each), after an ID3v2 tag, with no Xing header: its length is known only by counting. A
// declared Xing frame count, when not 0, goes into an Info header in the first frame.
func MP3(d time.Duration, declaredFrames uint32) []byte {
	var b bytes.Buffer
	b.WriteString("ID3\x04\x00\x00\x00\x00\x00\x0ATIT2\x00\x00\x00\x00\x00\x00") // a 10-byte tag body
	frames := int(d / (36 * time.Millisecond))
	for i := 0; i < frames; i++ {
		f := make([]byte, 144)
		copy(f, []byte{0xFF, 0xFB, 0x18, 0xC4}) // MPEG-1 layer III, 32 kbit/s, 32 kHz, mono
		if i == 0 && declaredFrames > 0 {
			copy(f[4+17:], "Info")
			binary.BigEndian.PutUint32(f[4+17+4:], 1)
			binary.BigEndian.PutUint32(f[4+17+8:], declaredFrames)
		}
		b.Write(f)
	}
	return b.Bytes()
}

// MP4 returns an M4A of d (time scale 1000): an ftyp box and a moov box with a movie header
// and one audio track whose media header and sample table (1024-sample frames at 44.1 kHz)
// both say d.
func MP4(d time.Duration) []byte {
	box := func(kind string, parts ...[]byte) []byte {
		body := bytes.Join(parts, nil)
		out := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
		return append(append(out, kind...), body...)
	}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	header := func(scale, dur uint32) []byte { // version 0: flags, created, modified, scale, duration
		return bytes.Join([][]byte{u32(0), u32(0), u32(0), u32(scale), u32(dur), make([]byte, 20)}, nil)
	}
	frames := uint32(d.Seconds() * 44100 / 1024)
	stts := bytes.Join([][]byte{u32(0), u32(1), u32(frames), u32(1024)}, nil)
	return append(box("ftyp", []byte("M4A "), u32(0), []byte("M4A isom")),
		box("moov",
			box("mvhd", header(1000, uint32(d.Milliseconds()))),
			box("trak", box("mdia",
				box("mdhd", header(44100, frames*1024)),
				box("minf", box("stbl", box("stts", stts))))))...)
}

// WebM returns a browser-style WebM recording of d: no Duration in its Info, clusters of
// unknown size, each a second of 20 ms SimpleBlocks.
func WebM(d time.Duration) []byte {
	el := func(id []byte, body []byte) []byte {
		size := binary.BigEndian.AppendUint64(nil, uint64(len(body)))
		size[0] = 0x01 // an 8-byte size
		return append(append(append([]byte(nil), id...), size...), body...)
	}
	unknown := []byte{0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	var b bytes.Buffer
	b.Write(el([]byte{0x1A, 0x45, 0xDF, 0xA3}, el([]byte{0x42, 0x82}, []byte("webm"))))
	b.Write([]byte{0x18, 0x53, 0x80, 0x67})
	b.Write(unknown)
	b.Write(el([]byte{0x15, 0x49, 0xA9, 0x66}, el([]byte{0x2A, 0xD7, 0xB1}, []byte{0x0F, 0x42, 0x40})))
	ms := int(d.Milliseconds())
	for c := 0; c < ms; c += 1000 {
		b.Write([]byte{0x1F, 0x43, 0xB6, 0x75})
		b.Write(unknown)
		b.Write(el([]byte{0xE7}, binary.BigEndian.AppendUint32(nil, uint32(c))))
		for t := 0; t < 1000 && c+t < ms; t += 20 {
			block := append([]byte{0x81}, binary.BigEndian.AppendUint16(nil, uint16(t))...)
			block = append(block, 0x80, 0xF8, 0xFF, 0xFE)
			b.Write(el([]byte{0xA3}, block))
		}
	}
	return b.Bytes()
}
