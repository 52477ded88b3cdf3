package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"
)

var oggMagic = []byte("OggS")

// oggStream is what the pages of an OGG stream tell of its length.
type oggStream struct {
	serial  uint32
	codec   string // "opus" or "vorbis"
	rate    uint64 // samples a second
	preSkip uint64
	granule uint64 // the largest granule position seen
	samples uint64 // Opus: the samples of the packets counted from their TOC bytes
}

// oggDuration reads an OGG/Opus or OGG/Vorbis recording's length: the larger of its last
// granule position and (Opus) the samples its packets hold, less the Opus pre-skip. Only the
// first logical stream counts.
func oggDuration(data []byte) (time.Duration, error) {
	var s oggStream
	for i := 0; i+27 <= len(data); {
		if !bytes.Equal(data[i:i+4], oggMagic) {
			j := bytes.Index(data[i+1:], oggMagic)
			if j < 0 {
				break
			}
			i += 1 + j
			continue
		}
		h := data[i : i+27]
		nseg := int(h[26])
		if i+27+nseg > len(data) {
			break
		}
		segs := data[i+27 : i+27+nseg]
		size := 0
		for _, n := range segs {
			size += int(n)
		}
		body := data[i+27+nseg : min(len(data), i+27+nseg+size)]
		if err := s.page(h, segs, body); err != nil {
			return 0, err
		}
		i += 27 + nseg + size
	}
	if s.codec == "" {
		return 0, errors.New("no Opus or Vorbis stream")
	}
	ticks := max(s.granule, s.samples)
	if ticks < s.preSkip {
		return 0, nil
	}
	return span(ticks-s.preSkip, s.rate), nil
}

// page takes in one page: the first names the stream and its codec.
func (s *oggStream) page(h, segs, body []byte) error {
	serial := binary.LittleEndian.Uint32(h[14:18])
	if s.codec == "" {
		switch {
		case bytes.HasPrefix(body, []byte("OpusHead")) && len(body) >= 12:
			s.codec, s.rate = "opus", 48000
			s.preSkip = uint64(binary.LittleEndian.Uint16(body[10:12]))
		case bytes.HasPrefix(body, []byte("\x01vorbis")) && len(body) >= 16:
			s.codec = "vorbis"
			s.rate = uint64(binary.LittleEndian.Uint32(body[12:16]))
		default:
			return errors.New("the first page names no Opus or Vorbis stream")
		}
		s.serial = serial
		return nil
	}
	if serial != s.serial {
		return nil
	}
	if g := binary.LittleEndian.Uint64(h[6:14]); g != ^uint64(0) && g > s.granule {
		s.granule = g
	}
	if s.codec == "opus" {
		s.samples += opusPageSamples(h[5]&1 != 0, segs, body)
	}
	return nil
}

// opusPageSamples counts the samples (at 48 kHz) of the Opus packets that start on a page, by
// their TOC bytes (RFC 6716 section 3.1). continued is true when the page's first segment goes
// on a packet begun on an earlier page.
func opusPageSamples(continued bool, segs, body []byte) uint64 {
	total := uint64(0)
	off, start := 0, !continued
	for _, n := range segs {
		if start && off < len(body) && !bytes.HasPrefix(body[off:], []byte("OpusTags")) {
			total += opusPacketSamples(body[off:min(len(body), off+int(n))])
		}
		off += int(n)
		start = n < 255
	}
	return total
}

// opusFrameSamples is the samples of one frame by the TOC byte's configuration number.
var opusFrameSamples = [32]uint64{
	480, 960, 1920, 2880, 480, 960, 1920, 2880, 480, 960, 1920, 2880, // SILK: 10, 20, 40, 60 ms
	480, 960, 480, 960, // hybrid: 10, 20 ms
	120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, // CELT
}

// opusPacketSamples is the samples one Opus packet holds; 0 for an empty one.
func opusPacketSamples(p []byte) uint64 {
	if len(p) == 0 {
		return 0
	}
	frame := opusFrameSamples[p[0]>>3]
	switch p[0] & 3 {
	case 0:
		return frame
	case 1, 2:
		return 2 * frame
	}
	if len(p) < 2 {
		return 0
	}
	return min(uint64(p[1]&0x3F)*frame, 5760) // a packet holds at most 120 ms
}
