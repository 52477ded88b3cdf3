package audio_test

import (
	"errors"
	"testing"
	"time"

	"relaybot/internal/testkit/files"
	"relaybot/media/audio"
)

// FuzzDuration measures any bytes: a positive length or ErrUnmeasured, never a panic, a
// negative length or 0 taken for a length.
func FuzzDuration(f *testing.F) {
	for _, data := range [][]byte{
		files.OggOpus(2 * time.Second), files.WAV(time.Second), files.MP3(time.Second, 0), files.MP3(time.Second, 5),
		files.MP4(time.Second), files.WebM(time.Second), []byte("ID3\x04\x00\x00\x7f\x7f\x7f\x7f"),
	} {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := audio.Duration(data)
		switch {
		case err != nil && !errors.Is(err, audio.ErrUnmeasured):
			t.Fatalf("error %v is not ErrUnmeasured", err)
		case err == nil && d <= 0:
			t.Fatalf("measured %v without an error", d)
		}
	})
}
