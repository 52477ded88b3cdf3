package audio

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Matroska element IDs read (with their length marker bits, as the specification writes them).
const (
	ebmlSegment       = 0x18538067
	ebmlInfo          = 0x1549A966
	ebmlTimecodeScale = 0x2AD7B1
	ebmlDuration      = 0x4489
	ebmlCluster       = 0x1F43B675
	ebmlTimecode      = 0xE7
	ebmlBlockGroup    = 0xA0
	ebmlBlock         = 0xA1
	ebmlSimpleBlock   = 0xA3
	ebmlBlockDuration = 0x9B
)

// webmDuration reads a WebM/Matroska recording's length: the larger of the Info element's
// Duration and the time of the last block the clusters hold. A browser's recording declares
// no Duration and streams its clusters with unknown sizes, so the elements are read as one
// flat run: the containers read are entered, every other element skipped by its size.
func webmDuration(data []byte) (time.Duration, error) {
	scale := uint64(1_000_000) // nanoseconds a tick
	var declared float64
	var cluster, last uint64
	blocks := false
	for i := 0; i < len(data); {
		id, n := ebmlID(data[i:])
		if n == 0 {
			break
		}
		size, m, known := ebmlSize(data[i+n:])
		if m == 0 {
			break
		}
		start := i + n + m
		if id == ebmlSegment || id == ebmlInfo || id == ebmlCluster || id == ebmlBlockGroup {
			i = start
			continue
		}
		if !known || size > uint64(len(data)-start) {
			break
		}
		body := data[start : start+int(size)]
		switch id {
		case ebmlTimecodeScale:
			if v := ebmlUint(body); v > 0 {
				scale = v
			}
		case ebmlDuration:
			declared = ebmlFloat(body)
		case ebmlTimecode:
			cluster = ebmlUint(body)
		case ebmlSimpleBlock, ebmlBlock:
			if _, k, _ := ebmlSize(body); k > 0 && len(body) >= k+2 {
				blocks = true
				rel := int64(int16(binary.BigEndian.Uint16(body[k : k+2])))
				if t := int64(cluster) + rel; t > 0 && uint64(t) > last {
					last = uint64(t)
				}
			}
		case ebmlBlockDuration:
			last = max(last, cluster+ebmlUint(body))
		}
		i = start + int(size)
	}
	if !blocks && declared == 0 {
		return 0, errors.New("no Duration and no blocks")
	}
	ticks := float64(last)
	if declared > ticks && !math.IsInf(declared, 0) {
		ticks = declared
	}
	ns := ticks * float64(scale)
	if ns >= math.MaxInt64 || math.IsNaN(ns) {
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(ns), nil
}

// ebmlID reads an element ID (1 to 4 bytes, marker bits kept) and its length; 0 when invalid.
func ebmlID(b []byte) (uint32, int) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0
	}
	n := 1
	for mask := byte(0x80); b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if n > 4 || len(b) < n {
		return 0, 0
	}
	id := uint32(0)
	for _, c := range b[:n] {
		id = id<<8 | uint32(c)
	}
	return id, n
}

// ebmlSize reads an element size (1 to 8 bytes, marker stripped) and its length; known is
// false for the all-ones "unknown size" of a streamed element. The length is 0 when invalid.
func ebmlSize(b []byte) (size uint64, n int, known bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, false
	}
	n = 1
	for mask := byte(0x80); b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if len(b) < n {
		return 0, 0, false
	}
	size = uint64(b[0] & (0xFF >> n))
	allOnes := size == uint64(0xFF>>n)
	for _, c := range b[1:n] {
		size = size<<8 | uint64(c)
		allOnes = allOnes && c == 0xFF
	}
	return size, n, !allOnes
}

func ebmlUint(b []byte) uint64 {
	v := uint64(0)
	for _, c := range b[:min(len(b), 8)] {
		v = v<<8 | uint64(c)
	}
	return v
}

func ebmlFloat(b []byte) float64 {
	switch len(b) {
	case 4:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case 8:
		return math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return 0
}
