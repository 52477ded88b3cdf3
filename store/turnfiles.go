package store

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// TurnFile is a file of a turn as the admin's conversation page names it: one the member sent
// with their message (an image, a voice note, audio, a document) or one the bot sent with its
// answer (a generated image, a spoken answer, a tool's file).
type TurnFile struct {
	// Seq is its place among the turn's files (FinishTurn numbers them in order).
	Seq     int    `json:"seq"`
	FromBot bool   `json:"from_bot"`
	Kind    string `json:"kind"` // image, voice, audio, video, document, file
	Name    string `json:"name"`
	MIME    string `json:"mime"`
	Size    int64  `json:"size"`
	// Data are the bytes of a picture the bot sent, up to MaxKeptFileBytes; nil otherwise.
	// Read back, Kept says they are there and TurnFile returns them.
	Data []byte `json:"-"`
	Kept bool   `json:"kept"`
}

// MaxKeptFileBytes is the largest picture the bot sent whose bytes FinishTurn keeps.
const MaxKeptFileBytes = 1 << 20

// keepsData reports whether a file's bytes are kept: only a picture the bot sent, up to the cap;
// what members send is named, not kept (their messages keep an image count, not the image).
func (f TurnFile) keepsData() bool {
	return f.FromBot && len(f.Data) > 0 && len(f.Data) <= MaxKeptFileBytes && len(f.MIME) > 6 && f.MIME[:6] == "image/"
}

// turnFileRow is a row of turn_files.
type turnFileRow struct {
	TurnID int64  `gorm:"column:turn_id;primaryKey"`
	Seq    int    `gorm:"column:seq;primaryKey"`
	Sender string `gorm:"column:sender"`
	Kind   string `gorm:"column:kind"`
	Name   string `gorm:"column:name"`
	MIME   string `gorm:"column:mime"`
	Size   int64  `gorm:"column:size"`
	Data   []byte `gorm:"column:data"`
}

func (turnFileRow) TableName() string { return "turn_files" }

// The senders of turn_files.sender.
const (
	fileFromMember = "member"
	fileFromBot    = "bot"
)

// addTurnFiles saves a turn's files, numbered in order.
func addTurnFiles(tx *gorm.DB, turnID int64, files []TurnFile) error {
	if len(files) == 0 {
		return nil
	}
	rows := make([]turnFileRow, len(files))
	for i, f := range files {
		rows[i] = turnFileRow{TurnID: turnID, Seq: i, Sender: fileFromMember, Kind: validText(f.Kind),
			Name: validText(f.Name), MIME: validText(f.MIME), Size: f.Size}
		if f.FromBot {
			rows[i].Sender = fileFromBot
		}
		if f.Size == 0 {
			rows[i].Size = int64(len(f.Data))
		}
		if f.keepsData() {
			rows[i].Data = f.Data
		}
	}
	return tx.CreateInBatches(&rows, 100).Error
}

// public is the row as TurnFile, with its bytes when data says to keep them.
func (r turnFileRow) public(data bool) TurnFile {
	f := TurnFile{Seq: r.Seq, FromBot: r.Sender == fileFromBot, Kind: r.Kind, Name: r.Name, MIME: r.MIME, Size: r.Size,
		Kept: len(r.Data) > 0}
	if data {
		f.Data = r.Data
	}
	return f
}

// filesOf reads the files of turns ids (their names and sizes, not their bytes) by turn.
func (s *TranscriptQuery) filesOf(ctx context.Context, ids []int64) (map[int64][]TurnFile, error) {
	var rows []struct {
		TurnID, Size       int64
		Seq                int
		Sender, Kind, Name string
		MIME               string `gorm:"column:mime"`
		Kept               bool
	}
	err := s.r.WithContext(ctx).Model(&turnFileRow{}).
		Select("turn_id, seq, sender, kind, name, mime, size, data IS NOT NULL AS kept").
		Where("turn_id IN ?", ids).Order("turn_id, seq").Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := map[int64][]TurnFile{}
	for _, r := range rows {
		out[r.TurnID] = append(out[r.TurnID], TurnFile{Seq: r.Seq, FromBot: r.Sender == fileFromBot, Kind: r.Kind,
			Name: r.Name, MIME: r.MIME, Size: r.Size, Kept: r.Kept})
	}
	return out, nil
}

// TurnFile returns file seq of turn turnID with its bytes (nil when not kept); ErrNotFound
// (wrapped) when the turn has no such file.
func (s *TranscriptQuery) TurnFile(ctx context.Context, turnID int64, seq int) (TurnFile, error) {
	var row turnFileRow
	err := s.r.WithContext(ctx).Where("turn_id = ? AND seq = ?", turnID, seq).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return TurnFile{}, fmt.Errorf("store: file %d of turn %d: %w", seq, turnID, ErrNotFound)
	}
	if err != nil {
		return TurnFile{}, fmt.Errorf("store: file %d of turn %d: %w", seq, turnID, err)
	}
	return row.public(true), nil
}
