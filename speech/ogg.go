package speech

import (
	"bytes"
	"encoding/binary"
	"time"
)

// OggDuration reads the length of an OGG/Opus recording from its last page's granule position
// (samples at 48 kHz, less the pre-skip of the Opus header); 0 when data is not OGG/Opus.
func OggDuration(data []byte) time.Duration {
	if !bytes.HasPrefix(data, oggMagic) || len(data) < 27 {
		return 0
	}
	preSkip := uint64(0)
	if i := bytes.Index(data[:min(len(data), 512)], []byte("OpusHead")); i >= 0 && i+12 <= len(data) {
		preSkip = uint64(binary.LittleEndian.Uint16(data[i+10 : i+12]))
	} else {
		return 0
	}
	last := bytes.LastIndex(data, oggMagic)
	for last >= 0 && last+14 > len(data) {
		last = bytes.LastIndex(data[:last], oggMagic)
	}
	if last < 0 {
		return 0
	}
	granule := binary.LittleEndian.Uint64(data[last+6 : last+14])
	if granule == ^uint64(0) || granule < preSkip {
		return 0
	}
	return time.Duration(granule-preSkip) * time.Second / 48000
}
