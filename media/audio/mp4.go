package audio

import (
	"encoding/binary"
	"errors"
	"time"
)

// mp4Duration reads an MP4/M4A (or MOV, 3GP) recording's length: the longest of the movie
// header's duration, each track's media header duration and the sum of each track's sample
// durations (stts), each in its own time scale.
func mp4Duration(data []byte) (time.Duration, error) {
	var m mp4Walk
	m.boxes(data, 0)
	if m.longest == 0 && !m.found {
		return 0, errors.New("no movie or track header")
	}
	return m.longest, nil
}

// mp4Walk collects the durations the boxes of a file declare.
type mp4Walk struct {
	longest    time.Duration
	trackScale uint64 // the time scale of the track being read (its mdhd)
	found      bool
}

// mp4Containers are the boxes that hold the boxes read.
var mp4Containers = map[string]bool{"moov": true, "trak": true, "mdia": true, "minf": true, "stbl": true}

// boxes reads the boxes of b, descending into containers (at most 8 deep).
func (m *mp4Walk) boxes(b []byte, depth int) {
	for len(b) >= 8 && depth < 8 {
		size, kind, head := uint64(binary.BigEndian.Uint32(b)), string(b[4:8]), 8
		switch size {
		case 0:
			size = uint64(len(b))
		case 1:
			if len(b) < 16 {
				return
			}
			size, head = binary.BigEndian.Uint64(b[8:16]), 16
		}
		if size < uint64(head) {
			return
		}
		body := b[head:min(uint64(len(b)), size)]
		switch {
		case mp4Containers[kind]:
			if kind == "trak" {
				m.trackScale = 0
			}
			m.boxes(body, depth+1)
		case kind == "mvhd":
			m.header(body, false)
		case kind == "mdhd":
			m.header(body, true)
		case kind == "stts":
			m.sampleTimes(body)
		}
		if size >= uint64(len(b)) {
			return
		}
		b = b[size:]
	}
}

// header reads a movie (mvhd) or media (mdhd) header: version, flags, times, scale, duration.
func (m *mp4Walk) header(b []byte, track bool) {
	var scale, dur uint64
	switch {
	case len(b) >= 32 && b[0] == 1:
		scale, dur = uint64(binary.BigEndian.Uint32(b[20:24])), binary.BigEndian.Uint64(b[24:32])
	case len(b) >= 20 && b[0] == 0:
		scale, dur = uint64(binary.BigEndian.Uint32(b[12:16])), uint64(binary.BigEndian.Uint32(b[16:20]))
	default:
		return
	}
	m.found = true
	if track {
		m.trackScale = scale
	}
	if dur != ^uint64(0) && dur != 0xFFFFFFFF {
		m.longest = max(m.longest, span(dur, scale))
	}
}

// sampleTimes sums a track's sample durations (stts: count, delta pairs) in its time scale.
func (m *mp4Walk) sampleTimes(b []byte) {
	if len(b) < 8 || m.trackScale == 0 {
		return
	}
	n := uint64(binary.BigEndian.Uint32(b[4:8]))
	total := uint64(0)
	for i := uint64(0); i < n && 8+8*i+8 <= uint64(len(b)); i++ {
		e := b[8+8*i:]
		count, delta := uint64(binary.BigEndian.Uint32(e[0:4])), uint64(binary.BigEndian.Uint32(e[4:8]))
		hi, lo := mulSaturate(count, delta)
		if hi || total+lo < total {
			total = ^uint64(0)
			break
		}
		total += lo
	}
	m.longest = max(m.longest, span(total, m.trackScale))
}

// mulSaturate multiplies two counts, reporting overflow.
func mulSaturate(a, b uint64) (overflow bool, product uint64) {
	if a != 0 && b > ^uint64(0)/a {
		return true, 0
	}
	return false, a * b
}
