package store

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"relaybot/chat"
)

// TestATurnKeepsItsFilesNamedAndTheBotsPicturesWhole: the files of a turn (the member's and the
// bot's) come back with the conversation's page in order, named, typed and sized; the bytes
// are kept of a picture the bot sent within the cap only, never of what the member sent; and
// they go with their turn.
func TestATurnKeepsItsFilesNamedAndTheBotsPicturesWhole(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: chat.Telegram, ChatID: "9"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "9", UserMessage: chat.Message{Role: chat.RoleUser, Content: "draw this"}})
		if err != nil {
			t.Fatal(err)
		}
		png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 100)...)
		files := []TurnFile{
			{Kind: "image", Name: "sketch.jpg", MIME: "image/jpeg", Data: []byte("member's photo")},
			{Kind: "voice", Name: "voice", MIME: "audio/ogg", Size: 5000},
			{FromBot: true, Kind: "image", Name: "image-1.png", MIME: "image/png", Data: png},
			{FromBot: true, Kind: "image", Name: "huge.png", MIME: "image/png", Data: make([]byte, MaxKeptFileBytes+1)},
			{FromBot: true, Kind: "voice", Name: "answer.ogg", MIME: chat.VoiceMIME, Data: []byte("opus")},
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: chat.StatusOK, Files: files,
			Messages: []chat.Message{{Role: chat.RoleAssistant, Content: "here it is"}}}); err != nil {
			t.Fatal(err)
		}
		tr, err := s.Transcripts.Transcript(ctx, c.ID, Paging{})
		if err != nil {
			t.Fatal(err)
		}
		got := tr.Turns[0].Files
		want := []TurnFile{
			{Seq: 0, Kind: "image", Name: "sketch.jpg", MIME: "image/jpeg", Size: 14},
			{Seq: 1, Kind: "voice", Name: "voice", MIME: "audio/ogg", Size: 5000},
			{Seq: 2, FromBot: true, Kind: "image", Name: "image-1.png", MIME: "image/png", Size: int64(len(png)), Kept: true},
			{Seq: 3, FromBot: true, Kind: "image", Name: "huge.png", MIME: "image/png", Size: MaxKeptFileBytes + 1},
			{Seq: 4, FromBot: true, Kind: "voice", Name: "answer.ogg", MIME: chat.VoiceMIME, Size: 4},
		}
		if len(got) != len(want) {
			t.Fatalf("the page names %d files, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			if g := got[i]; g.Seq != want[i].Seq || g.FromBot != want[i].FromBot || g.Kind != want[i].Kind || g.Name != want[i].Name ||
				g.MIME != want[i].MIME || g.Size != want[i].Size || g.Kept != want[i].Kept || g.Data != nil {
				t.Errorf("file %d reads %+v, want %+v", i, g, want[i])
			}
		}
		f, err := s.Transcripts.TurnFile(ctx, id, 2)
		if err != nil || !bytes.Equal(f.Data, png) || f.MIME != "image/png" {
			t.Errorf("the bot's picture reads back %d bytes of %q, %v; want the PNG", len(f.Data), f.MIME, err)
		}
		for _, seq := range []int{0, 3, 4} {
			if f, err := s.Transcripts.TurnFile(ctx, id, seq); err != nil || f.Data != nil {
				t.Errorf("file %d kept %d bytes (%v); want none kept", seq, len(f.Data), err)
			}
		}
		if _, err := s.Transcripts.TurnFile(ctx, id, 9); !errors.Is(err, ErrNotFound) {
			t.Errorf("a file the turn does not have: %v, want ErrNotFound", err)
		}
		if err := s.w.Exec(`DELETE FROM conversations WHERE id = ?`, c.ID).Error; err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "turn_files", ""); n != 0 {
			t.Errorf("%d files outlived their deleted turn", n)
		}
	})
}
