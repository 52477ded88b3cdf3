package audio

import (
	"encoding/binary"
	"errors"
	"time"
)

// mp3Frame is what one MPEG audio frame header says.
type mp3Frame struct {
	size    int    // bytes, header included
	samples uint64 // samples a channel
	rate    uint64 // samples a second
	mono    bool
	mpeg1   bool
}

var (
	mp3Bitrates = [2][3][16]uint64{ // [MPEG-1?][layer I, II, III][index] kbit/s
		{
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256, 0},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},
		},
		{
			{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 0},
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 0},
			{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0},
		},
	}
	mp3Rates = [4][3]uint64{ // [version bits][index]: MPEG-2.5, reserved, MPEG-2, MPEG-1
		{11025, 12000, 8000}, {}, {22050, 24000, 16000}, {44100, 48000, 32000},
	}
)

// parseMP3Frame reads the frame header at the start of b; false when there is none.
func parseMP3Frame(b []byte) (mp3Frame, bool) {
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return mp3Frame{}, false
	}
	version, layerBits := (b[1]>>3)&3, (b[1]>>1)&3
	bitIdx, rateIdx, pad := b[2]>>4, (b[2]>>2)&3, uint64((b[2]>>1)&1)
	if version == 1 || layerBits == 0 || bitIdx == 0 || bitIdx == 15 || rateIdx == 3 {
		return mp3Frame{}, false
	}
	layer := 3 - int(layerBits) // 0: layer I, 1: II, 2: III
	mpeg1 := version == 3
	v := 0
	if mpeg1 {
		v = 1
	}
	bitrate := mp3Bitrates[v][layer][bitIdx] * 1000
	rate := mp3Rates[version][rateIdx]
	f := mp3Frame{rate: rate, mono: b[3]>>6 == 3, mpeg1: mpeg1}
	switch {
	case layer == 0:
		f.samples = 384
		f.size = int((12*bitrate/rate + pad) * 4)
	case layer == 2 && !mpeg1:
		f.samples = 576
		f.size = int(72*bitrate/rate + pad)
	default:
		f.samples = 1152
		f.size = int(144*bitrate/rate + pad)
	}
	return f, f.size >= 4
}

// mp3Duration reads an MP3 recording's length by counting its frames, after any ID3v2 tag;
// a Xing/Info or VBRI header's frame count is taken when it says more. A stretch that is not
// frames is skipped to the next pair of frames that follow each other.
func mp3Duration(data []byte) (time.Duration, error) {
	i := skipID3(data)
	var (
		ticks    uint64 // samples at rate
		rate     uint64
		declared uint64 // samples a Xing or VBRI header declares
		first    = true
	)
	for i+4 <= len(data) {
		f, ok := parseMP3Frame(data[i:])
		if ok && first {
			// The first frame must be followed by another (or end the file) to count, so
			// that stray sync bytes in a tag or junk are not taken for audio.
			next, okNext := parseMP3Frame(data[min(len(data), i+f.size):])
			ok = i+f.size == len(data) || okNext && next.rate == f.rate
		}
		if !ok || (rate != 0 && f.rate != rate) {
			i++
			continue
		}
		if first {
			declared = vbrFrames(data[i:min(len(data), i+f.size)], f) * f.samples
			first = false
		}
		rate = f.rate
		ticks += f.samples
		i += f.size
	}
	if rate == 0 {
		return 0, errors.New("no MPEG audio frames")
	}
	return span(max(ticks, declared), rate), nil
}

// vbrFrames is the frame count a Xing/Info or VBRI header in the first frame declares, 0 when
// it has none.
func vbrFrames(frame []byte, f mp3Frame) uint64 {
	side := 32
	switch {
	case f.mpeg1 && f.mono, !f.mpeg1 && !f.mono:
		side = 17
	case !f.mpeg1 && f.mono:
		side = 9
	}
	if x := 4 + side; len(frame) >= x+12 {
		tag := string(frame[x : x+4])
		if (tag == "Xing" || tag == "Info") && binary.BigEndian.Uint32(frame[x+4:x+8])&1 != 0 {
			return uint64(binary.BigEndian.Uint32(frame[x+8 : x+12]))
		}
	}
	if len(frame) >= 36+18 && string(frame[36:40]) == "VBRI" {
		return uint64(binary.BigEndian.Uint32(frame[36+14 : 36+18]))
	}
	return 0
}

// skipID3 returns the offset after an ID3v2 tag at the start of data (0 without one).
func skipID3(data []byte) int {
	if len(data) < 10 || string(data[:3]) != "ID3" {
		return 0
	}
	size := int(data[6]&0x7F)<<21 | int(data[7]&0x7F)<<14 | int(data[8]&0x7F)<<7 | int(data[9]&0x7F)
	if data[5]&0x10 != 0 {
		size += 10 // a footer
	}
	return min(len(data), 10+size)
}
