package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/chat"
)

// inbound turns a Telegram message into an Inbound, or false when it is not for the bot.
func (a *Adapter) inbound(ctx context.Context, m *message) (adapters.Inbound, bool) {
	in, ok := a.sender(m.Chat, m.From)
	if !ok {
		return adapters.Inbound{}, false
	}
	in.MessageID = strconv.Itoa(m.MessageID)
	in.Time = time.Unix(m.Date, 0).UTC()
	// Only a topic message belongs to a topic: a reply in a forum's General topic carries the
	// reply chain's message_thread_id too, and sending to that thread fails.
	if m.MessageThreadID != 0 && m.IsTopicMessage {
		in.Chat.ThreadID = strconv.Itoa(m.MessageThreadID)
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	text, ok = a.addressedText(m, &in, strings.TrimSpace(text))
	if !ok {
		return adapters.Inbound{}, false
	}
	if in.Command == "" {
		in.Text = text
	}
	a.addMedia(ctx, m, &in)
	if in.Command == "" && in.Text == "" && len(in.Images) == 0 && len(in.Attachments) == 0 {
		return adapters.Inbound{}, false
	}
	if a.access.Load().chatAdmins && in.Kind == adapters.Group {
		in.ChatAdmin = a.chatAdminCached(ctx, in.Chat, m.From.ID)
	}
	return in, true
}

// addressedText returns what of m's text is for the bot, with the trigger prefix or the bot's
// mention taken out and a command put in in.Command and in.Args; false when m is not addressed
// to the bot (a private chat always is; a group needs a command, the prefix, the mention or a
// reply to the bot) or its command names another bot.
func (a *Adapter) addressedText(m *message, in *adapters.Inbound, text string) (string, bool) {
	addressed := in.Kind == adapters.Private
	mention := "@" + strings.ToLower(a.self.UserName)

	// command takes a command at the start of text; false when it names another bot, whose
	// command this bot must neither run nor answer (several bots share a group).
	command := func(text string) bool {
		c, ok := adapters.ParseCommand(text)
		if !ok {
			return true
		}
		if !c.For(a.self.UserName) {
			return false
		}
		in.Command, in.Args = c.Name, c.Args
		addressed = true
		return true
	}
	if !command(text) {
		return "", false
	}
	if !addressed && a.opts.TriggerPrefix != "" && strings.HasPrefix(text, a.opts.TriggerPrefix) {
		text = strings.TrimSpace(strings.TrimPrefix(text, a.opts.TriggerPrefix))
		addressed = true
	}
	if i := indexFold(text, mention); i >= 0 && a.self.UserName != "" {
		end := i + len(mention)
		if end == len(text) || !isNameByte(text[end]) {
			text = strings.TrimSpace(text[:i] + text[end:])
			addressed = true
		}
	}
	// In a forum, every topic message "replies" to the topic's first message: not a reply to us.
	if r := m.ReplyTo; r != nil && r.From != nil && r.From.ID == a.self.ID &&
		!(m.IsTopicMessage && r.MessageID == m.MessageThreadID) {
		addressed = true
	}
	if !addressed {
		return "", false
	}
	// A command after the trigger prefix or our mention ("@bot /audit\nfetch_url").
	if in.Command == "" && !command(text) {
		return "", false
	}
	return text, true
}

// addMedia adds m's photo to in and, unless in is a command, m's other files.
func (a *Adapter) addMedia(ctx context.Context, m *message, in *adapters.Inbound) {
	if len(m.Photo) > 0 && a.opts.MaxImageBytes > 0 {
		img, err := a.photo(ctx, m.Photo)
		if err != nil {
			a.log.Warn("telegram: photo not downloaded", "chat", in.Chat.ChatID, "err", err)
		} else {
			in.Images = append(in.Images, img)
		}
	}
	if in.Command == "" {
		in.Attachments = a.attachments(m)
	}
}

// sender starts the Inbound of something user from did in chat, or false when the bot does
// not answer them there (its own messages, chats or users not allowed).
func (a *Adapter) sender(tc tgChat, from *tgbotapi.User) (adapters.Inbound, bool) {
	if from == nil || from.ID == a.self.ID {
		return adapters.Inbound{}, false
	}
	chatID := strconv.FormatInt(tc.ID, 10)
	userID := strconv.FormatInt(from.ID, 10)
	acc := a.access.Load()
	if acc.allowedChats != nil && !acc.allowedChats[chatID] && !(tc.Type == "private" && acc.accessUsers[userID]) {
		a.log.Debug("telegram: chat not allowed", "chat", chatID)
		return adapters.Inbound{}, false
	}
	if acc.allowedUsers != nil && !acc.allowedUsers[userID] && !acc.allowedUsers[strings.ToLower(from.UserName)] {
		a.log.Debug("telegram: user not allowed", "user", from.ID)
		return adapters.Inbound{}, false
	}
	in := adapters.Inbound{
		Chat:     chat.Ref{Platform: chat.Telegram, ChatID: chatID},
		Kind:     adapters.Private,
		UserID:   userID,
		UserName: from.UserName,
	}
	if in.UserName == "" {
		in.UserName = strings.TrimSpace(from.FirstName + " " + from.LastName)
	}
	if tc.Type != "private" {
		in.Kind = adapters.Group
	}
	return in, true
}

// indexFold returns the byte offset in s of the first match of the ASCII string sub, ignoring
// ASCII case, or -1. Unlike searching strings.ToLower(s), offsets stay those of s: lower-casing
// changes the UTF-8 length of some letters ("İ", the Kelvin sign).
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// photo downloads the largest size of a photo that fits MaxImageBytes.
func (a *Adapter) photo(ctx context.Context, sizes []photoSize) (adapters.Image, error) {
	best := -1
	for i, s := range sizes {
		if s.FileSize > a.opts.MaxImageBytes {
			continue
		}
		if best < 0 || s.Width*s.Height > sizes[best].Width*sizes[best].Height {
			best = i
		}
	}
	if best < 0 {
		return adapters.Image{}, fmt.Errorf("every size is over the %d-byte cap", a.opts.MaxImageBytes)
	}
	data, err := a.download(ctx, sizes[best].FileID, int64(a.opts.MaxImageBytes))
	if err != nil {
		return adapters.Image{}, err
	}
	mimeType := http.DetectContentType(data)
	if !strings.HasPrefix(mimeType, "image/") {
		mimeType = "image/jpeg" // Telegram stores photos as JPEG
	}
	return adapters.Image{MIME: mimeType, Data: data}, nil
}

// MaxDownload is the largest file the Bot API lets a bot download (getFile).
const MaxDownload = 20 << 20

// attachments lists the voice note, audio, video note or document of a message, fetched when
// the pipeline reads them (getFile, then the file URL).
func (a *Adapter) attachments(m *message) []adapters.Attachment {
	var out []adapters.Attachment
	add := func(kind adapters.AttachmentKind, f *tgFile, name, mimeType string) {
		if f == nil || f.FileID == "" {
			return
		}
		if f.FileName != "" {
			name = f.FileName
		}
		if f.MIMEType != "" {
			mimeType = f.MIMEType
		}
		id := f.FileID
		out = append(out, adapters.Attachment{Kind: kind, MIME: mimeType, Name: name, Size: f.FileSize,
			Duration: time.Duration(f.Duration) * time.Second, Limit: MaxDownload,
			Fetch: func(ctx context.Context, max int64) ([]byte, error) { return a.download(ctx, id, max) }})
	}
	add(adapters.Voice, m.Voice, "voice.ogg", "audio/ogg")
	add(adapters.Audio, m.Audio, "audio.mp3", "audio/mpeg")
	add(adapters.VideoNote, m.VideoNote, "video_note.mp4", "video/mp4")
	if d := m.Document; d != nil {
		kind := adapters.Document
		if strings.HasPrefix(d.MIMEType, "image/") {
			kind = adapters.Picture
		}
		add(kind, d, "file", "application/octet-stream")
	}
	return out
}

// download fetches a file by its id (getFile, then the file URL), reading at most max bytes.
func (a *Adapter) download(ctx context.Context, fileID string, max int64) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	res, err := a.api.call(cctx, "getFile", tgbotapi.Params{"file_id": fileID})
	if err != nil {
		return nil, err
	}
	var f tgbotapi.File
	if err := json.Unmarshal(res, &f); err != nil || f.FilePath == "" {
		return nil, fmt.Errorf("getFile answer without a file path: %s", res)
	}
	if int64(f.FileSize) > max {
		return nil, fmt.Errorf("%d bytes: %w", f.FileSize, adapters.ErrTooLarge)
	}
	fileURL := fmt.Sprintf(fileEndpoint(a.opts.APIEndpoint), a.opts.Token, f.FilePath)
	return adapters.HTTPFetch(a.opts.HTTPClient, fileURL, a.api.redact)(cctx, max)
}

// fileEndpoint derives the file download URL format from the API endpoint format.
func fileEndpoint(apiEndpoint string) string {
	if i := strings.LastIndex(apiEndpoint, "/bot%s/%s"); i >= 0 {
		return apiEndpoint[:i] + "/file/bot%s/%s"
	}
	return tgbotapi.FileEndpoint
}
