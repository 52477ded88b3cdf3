// Package audio measures how long a recording is from its container, not from what the sender
// declares: OGG (Opus, Vorbis), MP3 (frames counted; a Xing or VBRI header may only lengthen
// it), WAV, MP4/M4A and WebM/Matroska. Where a container has both a declared length and the
// means to count, the longer is taken: limits and bills follow what a decoder would play.
package audio

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// ErrUnmeasured is the error of a recording whose length cannot be read: not one of the
// containers this package reads, or broken.
var ErrUnmeasured = errors.New("the recording's length cannot be measured")

// Duration returns the length of a recording, or an error wrapping ErrUnmeasured.
func Duration(data []byte) (time.Duration, error) {
	var (
		d      time.Duration
		err    error
		format string
	)
	switch {
	case bytes.HasPrefix(data, []byte("OggS")):
		format = "OGG"
		d, err = oggDuration(data)
	case len(data) >= 12 && bytes.HasPrefix(data, []byte("RIFF")) && string(data[8:12]) == "WAVE":
		format = "WAV"
		d, err = wavDuration(data)
	case len(data) >= 8 && string(data[4:8]) == "ftyp":
		format = "MP4"
		d, err = mp4Duration(data)
	case bytes.HasPrefix(data, []byte{0x1A, 0x45, 0xDF, 0xA3}):
		format = "WebM"
		d, err = webmDuration(data)
	default:
		format = "MP3"
		d, err = mp3Duration(data)
	}
	if err == nil && d <= 0 {
		err = errors.New("it has no length")
	}
	if err != nil {
		return 0, fmt.Errorf("%w (%s: %v)", ErrUnmeasured, format, err)
	}
	return d, nil
}

// span converts a count of ticks at rate per second into a duration, saturating rather than
// overflowing.
func span(ticks, rate uint64) time.Duration {
	if rate == 0 {
		return 0
	}
	const most = uint64(1<<63-1)/uint64(time.Second) - 1
	secs, rest := ticks/rate, ticks%rate
	if secs >= most {
		return time.Duration(1<<63 - 1)
	}
	hi, lo := bits.Mul64(rest, uint64(time.Second))
	frac, _ := bits.Div64(hi, lo, rate) // rest < rate: the quotient is under a second
	return time.Duration(secs)*time.Second + time.Duration(frac)
}
