package audio_test

import (
	"errors"
	"testing"
	"time"

	"relaybot/internal/testkit/files"
	"relaybot/media/audio"
)

// Each container's length is measured from what it holds: a header that declares less than
// the frames, pages or blocks hold does not shorten it.
func TestDurationIsMeasuredFromTheContainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  []byte
		want  time.Duration
		slack time.Duration
	}{
		{"ogg opus voice note", files.OggOpus(3 * time.Second), 3 * time.Second, 0},
		{"ogg opus of five minutes", files.OggOpus(5 * time.Minute), 5 * time.Minute, 0},
		{"ogg opus whose granules say 1 s", lyingOgg(t, 5*time.Minute), 5 * time.Minute, 10 * time.Millisecond},
		{"wav", files.WAV(7 * time.Second), 7 * time.Second, 0},
		{"mp3 counted frame by frame", files.MP3(4*time.Second, 0), 4 * time.Second, 40 * time.Millisecond},
		{"mp3 whose Info header says 1 frame", files.MP3(5*time.Minute, 1), 5 * time.Minute, 40 * time.Millisecond},
		{"mp3 whose Info header says more", files.MP3(time.Second, 2000), 72 * time.Second, 0},
		{"m4a", files.MP4(2 * time.Second), 2 * time.Second, 30 * time.Millisecond},
		{"webm from a browser", files.WebM(3 * time.Second), 3 * time.Second, 30 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := audio.Duration(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := d - tc.want; diff < -tc.slack || diff > tc.slack {
				t.Fatalf("measured %v, want %v (±%v)", d, tc.want, tc.slack)
			}
		})
	}
}

// What is not a recording, or a recording cut before any audio, is unmeasured, never 0 s.
func TestUnmeasurableRecordingsAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte("just some words, no frames")},
		{"ogg without a codec", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")},
		{"ogg header only", files.OggOpus(0)},
		{"wav without data", files.WAV(0)[:36]},
		{"mp4 without moov", []byte("\x00\x00\x00\x10ftypM4A \x00\x00\x00\x00")},
		{"webm header only", files.WebM(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, err := audio.Duration(tc.data); !errors.Is(err, audio.ErrUnmeasured) {
				t.Fatalf("measured %v, %v; want ErrUnmeasured", d, err)
			}
		})
	}
}

// lyingOgg is a recording of d whose pages' granule positions all say 1 s.
func lyingOgg(t *testing.T, d time.Duration) []byte {
	t.Helper()
	data := files.OggOpus(d)
	for i := 0; i+27 <= len(data); {
		if string(data[i:i+4]) != "OggS" {
			t.Fatal("not a page")
		}
		if g := data[i+6 : i+14]; g[0]|g[1]|g[2]|g[3]|g[4]|g[5]|g[6]|g[7] != 0 {
			copy(g, []byte{0x80, 0xBB, 0, 0, 0, 0, 0, 0}) // 48000
		}
		n := int(data[i+26])
		size := 27 + n
		for _, s := range data[i+27 : i+27+n] {
			size += int(s)
		}
		i += size
	}
	return data
}
