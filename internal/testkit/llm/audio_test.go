package llm

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/files"
)

// The fake's audio endpoints refuse what OpenAI's refuse: a form without a file or a model, an
// unknown field, a container it does not read, OGG bytes that are not a whole OGG stream, and a
// speech request without a voice or with an unknown field.
func TestAudioEndpointsRefuseWhatTheAPIRefuses(t *testing.T) {
	s := NewServer()
	defer s.Close()
	ogg := files.OggOpus(time.Second)
	broken := append([]byte(nil), ogg...)
	broken[len(broken)-1] ^= 0xff // the last page's checksum no longer holds
	form := func(fields map[string]string, name string, data []byte) (string, *bytes.Buffer) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		for k, v := range fields {
			_ = w.WriteField(k, v)
		}
		if name != "" {
			f, _ := w.CreateFormFile("file", name)
			_, _ = f.Write(data)
		}
		w.Close()
		return w.FormDataContentType(), &b
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		file   string
		data   []byte
		want   int
		text   string
	}{
		{name: "a voice note", fields: map[string]string{"model": "whisper-1"}, file: "voice.ogg", data: ogg, want: 200, text: "transcript of"},
		{name: "no model", fields: map[string]string{}, file: "voice.ogg", data: ogg, want: 400, text: "model"},
		{name: "no file", fields: map[string]string{"model": "whisper-1"}, want: 400, text: "file"},
		{name: "an unknown field", fields: map[string]string{"model": "whisper-1", "voice": "x"}, file: "voice.ogg", data: ogg, want: 400, text: "unrecognized"},
		{name: "an unknown container", fields: map[string]string{"model": "whisper-1"}, file: "voice.amr", data: ogg, want: 400, text: "Invalid file format"},
		{name: "not OGG inside", fields: map[string]string{"model": "whisper-1"}, file: "voice.ogg", data: []byte("ID3\x04 an mp3"), want: 400, text: "OggS"},
		{name: "a broken OGG page", fields: map[string]string{"model": "whisper-1"}, file: "voice.ogg", data: broken, want: 400, text: "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := form(tc.fields, tc.file, tc.data)
			resp, err := http.Post(s.URL+"/audio/transcriptions", ct, body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Text  string                   `json:"text"`
				Error struct{ Message string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			if resp.StatusCode != tc.want || !strings.Contains(out.Text+out.Error.Message, tc.text) {
				t.Fatalf("answered %d %+v, want %d mentioning %q", resp.StatusCode, out, tc.want, tc.text)
			}
		})
	}
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"opus speech", `{"model":"tts-1","input":"hi there","voice":"alloy","response_format":"opus"}`, 200},
		{"no voice", `{"model":"tts-1","input":"hi","response_format":"opus"}`, 400},
		{"an unknown field", `{"model":"tts-1","input":"hi","voice":"alloy","response_format":"opus","pitch":2}`, 400},
		{"input over 4096 characters", `{"model":"tts-1","input":"` + strings.Repeat("a", 4097) + `","voice":"alloy","response_format":"opus"}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(s.URL+"/audio/speech", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("answered %d %s, want %d", resp.StatusCode, b.String(), tc.want)
			}
			if tc.want == 200 {
				if err := files.CheckOgg(b.Bytes()); err != nil {
					t.Fatalf("speech is not OGG: %v", err)
				}
			}
		})
	}
}
