package telegram

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/files"
)

// A user's file is downloaded with getFile and the file URL, as on Telegram, and one over the
// Bot API's 20 MB limit is refused by getFile.
func TestUserFilesDownloadWithinTheBotAPILimit(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chat := Chat{ID: 77, Type: "private"}
	ogg := files.OggOpus(time.Second)
	s.Send(Inbound{Chat: chat, From: User{ID: 77}, File: &File{Kind: "voice", MIME: "audio/ogg", Data: ogg, Duration: 1}})
	s.Send(Inbound{Chat: chat, From: User{ID: 77}, File: &File{Kind: "document", Name: "big.iso", Size: 30 << 20}})
	var ids []string
	for _, u := range s.updates {
		var up struct {
			Message map[string]struct {
				FileID string `json:"file_id"`
			} `json:"message"`
		}
		_ = json.Unmarshal(u, &up)
		for _, k := range []string{"voice", "document"} {
			if f, ok := up.Message[k]; ok {
				ids = append(ids, f.FileID)
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("file ids in the updates: %v", ids)
	}
	a := post(t, s, s.Token(), "getFile", url.Values{"file_id": {ids[0]}})
	var f struct {
		FilePath string `json:"file_path"`
	}
	_ = json.Unmarshal(a.Result, &f)
	resp, err := http.Get(s.BaseURL() + "/file/bot" + s.Token() + "/" + f.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(data, ogg) {
		t.Fatalf("downloaded %d bytes, want the voice note's %d", len(data), len(ogg))
	}
	if a := post(t, s, s.Token(), "getFile", url.Values{"file_id": {ids[1]}}); a.OK || !strings.Contains(a.Description, "file is too big") {
		t.Fatalf("getFile of a 30 MB file answered %+v, want the 20 MB refusal", a)
	}
}

// sendVoice takes an OGG/Opus upload under "voice" with the documented parameters only.
func TestSendVoiceTakesOggAndDocumentedParameters(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Send(Inbound{Chat: Chat{ID: 78, Type: "private"}, From: User{ID: 78}, Text: "hi"})
	send := func(params map[string]string, field string, data []byte) answer {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		for k, v := range params {
			_ = w.WriteField(k, v)
		}
		fw, _ := w.CreateFormFile(field, "answer.ogg")
		_, _ = fw.Write(data)
		w.Close()
		resp, err := http.Post(s.BaseURL()+"/bot"+s.Token()+"/sendVoice", w.FormDataContentType(), &b)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		_ = json.NewDecoder(resp.Body).Decode(&a)
		return a
	}
	ogg := files.OggOpus(2 * time.Second)
	for _, tc := range []struct {
		name   string
		params map[string]string
		field  string
		data   []byte
		ok     bool
	}{
		{"a voice note", map[string]string{"chat_id": "78", "reply_to_message_id": "1"}, "voice", ogg, true},
		{"an undocumented parameter", map[string]string{"chat_id": "78", "title": "x"}, "voice", ogg, false},
		{"the file under another name", map[string]string{"chat_id": "78"}, "audio", ogg, false},
		{"not OGG", map[string]string{"chat_id": "78"}, "voice", []byte("ID3 not an ogg"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := send(tc.params, tc.field, tc.data); a.OK != tc.ok {
				t.Fatalf("sendVoice answered %+v, want ok=%t", a, tc.ok)
			}
		})
	}
	ms := s.BotMessages(78)
	if len(ms) != 1 || ms[0].Kind != "voice" || !bytes.Equal(ms[0].Data, ogg) {
		t.Fatalf("bot messages %+v: want the one voice message", ms)
	}
}
