package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
)

// dispatcher hands one update's message to the handler on its own goroutine; placed, when not
// nil, is called once the message has its place in its conversation's order, or takes none
// (adapters.Inbound.Placed), at the latest when the handler returns. handedOver is 0 for an
// update's first delivery; for one handed over again after a run stopped before finishing it, it
// is the least count of such handovers known (1 from the offset file; the deployment's count of
// adoptions for a dead replica's update).
type dispatcher func(id int64, m *message, handedOver int, placed func())

// actor takes an update that is a user's action on what the bot sent (a pressed inline
// button, a stopped draft) rather than a message. Actions are not journaled: after a crash
// the reply they act on is gone.
type actor func(u *update)

// allowedUpdates are the update kinds the bot asks Telegram for.
const allowedUpdates = `["message","callback_query","stopped_message_generation"]`

type update struct {
	UpdateID          int64              `json:"update_id"`
	Message           *message           `json:"message"`
	CallbackQuery     *callbackQuery     `json:"callback_query"`
	StoppedGeneration *generationStopped `json:"stopped_message_generation"`
}

// isAction reports whether the update is an action for an actor.
func (u *update) isAction() bool { return u.CallbackQuery != nil || u.StoppedGeneration != nil }

type message struct {
	MessageID       int             `json:"message_id"`
	MessageThreadID int             `json:"message_thread_id"`
	IsTopicMessage  bool            `json:"is_topic_message"`
	From            *tgbotapi.User  `json:"from"`
	Chat            tgChat          `json:"chat"`
	Date            int64           `json:"date"`
	Text            string          `json:"text"`
	Caption         string          `json:"caption"`
	Photo           []photoSize     `json:"photo"`
	Voice           *tgFile         `json:"voice"`
	Audio           *tgFile         `json:"audio"`
	VideoNote       *tgFile         `json:"video_note"`
	Document        *tgFile         `json:"document"`
	ReplyTo         *message        `json:"reply_to_message"`
	Entities        json.RawMessage `json:"entities"`
}

type tgChat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"`
	IsForum bool   `json:"is_forum"`
}

// tgFile is the part of Voice, Audio, VideoNote and Document objects the bot reads.
type tgFile struct {
	FileID   string `json:"file_id"`
	FileName string `json:"file_name"`
	MIMEType string `json:"mime_type"`
	FileSize int64  `json:"file_size"`
	Duration int    `json:"duration"`
}

type photoSize struct {
	FileID   string `json:"file_id"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	FileSize int    `json:"file_size"`
}

// runPolling takes updates with getUpdates until ctx ends, backing off after a failed call;
// at the end it confirms the updates taken to the server.
func (a *Adapter) runPolling(ctx context.Context, dispatch dispatcher, act actor) error {
	// A webhook left over from webhook mode would make getUpdates fail.
	if err := a.api.callInto(ctx, "deleteWebhook", tgbotapi.Params{}, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("telegram: deleteWebhook failed", "err", err)
	}
	failures := 0
	for {
		a.mu.Lock()
		offset := a.offset
		a.mu.Unlock()
		ups, err := a.getUpdates(ctx, offset)
		if ctx.Err() != nil {
			a.confirm()
			return nil
		}
		if err != nil {
			failures++
			if !a.pollBackoff(ctx, failures, err) {
				a.confirm()
				return nil
			}
			continue
		}
		failures = 0
		b, next := a.sortUpdates(ups, offset)
		// On disk before the next getUpdates confirms them to the server.
		if next != offset {
			a.take(b.ids, b.raws, next)
		}
		a.setOffset(next)
		for i, id := range b.ids {
			if !a.takeShared(ctx, id, b.raws[i]) {
				a.dropLocal(id) // another replica's: answered by it, or as its orphan
				continue
			}
			dispatch(id, b.msgs[i], 0, nil)
		}
		for _, u := range b.acts {
			act(u)
		}
	}
}

// getUpdates long-polls for the updates from offset on (0: every update the server holds).
func (a *Adapter) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	p := tgbotapi.Params{
		"timeout":         strconv.Itoa(int(a.opts.PollTimeout / time.Second)),
		"allowed_updates": allowedUpdates,
	}
	if offset > 0 {
		p["offset"] = strconv.FormatInt(offset, 10)
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.PollTimeout+15*time.Second)
	defer cancel()
	var ups []json.RawMessage
	err := a.api.callInto(cctx, "getUpdates", p, &ups)
	return ups, err
}

// pollBackoff waits after the failures-th getUpdates in a row failed with err: as long as a 429
// says, else a second more for each failure up to 30. It reports false when ctx ended first.
func (a *Adapter) pollBackoff(ctx context.Context, failures int, err error) bool {
	wait := min(time.Duration(failures)*time.Second, 30*time.Second)
	var rl *adapters.RateLimitError
	if errors.As(err, &rl) {
		wait = rl.RetryAfter
	}
	a.log.Warn("telegram: getUpdates failed", "err", err, "retry_in", wait)
	t := time.NewTimer(wait)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// polledUpdates are the new updates of one getUpdates answer: the messages, each with its id
// and raw update (for the journal), and the actions.
type polledUpdates struct {
	ids  []int64
	raws []json.RawMessage
	msgs []*message
	acts []*update
}

// sortUpdates sorts the updates of one getUpdates answer, skipping those below offset (taken
// before) and those it cannot decode; next is the offset after the last one.
func (a *Adapter) sortUpdates(ups []json.RawMessage, offset int64) (b polledUpdates, next int64) {
	next = offset
	for _, raw := range ups {
		var u update
		if err := json.Unmarshal(raw, &u); err != nil {
			var id struct {
				UpdateID int64 `json:"update_id"`
			}
			if json.Unmarshal(raw, &id) == nil && id.UpdateID >= next {
				next = id.UpdateID + 1
			}
			a.log.Warn("telegram: undecodable update skipped", "err", err)
			continue
		}
		if u.UpdateID < next {
			continue // already taken
		}
		next = u.UpdateID + 1
		if u.Message == nil {
			if u.isAction() {
				b.acts = append(b.acts, &u)
			}
			continue
		}
		b.ids, b.raws, b.msgs = append(b.ids, u.UpdateID), append(b.raws, raw), append(b.msgs, u.Message)
	}
	return b, next
}

// setOffset records that every update below offset was taken.
func (a *Adapter) setOffset(offset int64) {
	a.mu.Lock()
	a.offset = offset
	a.mu.Unlock()
}

// confirm tells the server that every update taken so far is done, so a restart does not get
// them again even without an offset file.
func (a *Adapter) confirm() {
	a.mu.Lock()
	offset := a.offset
	a.mu.Unlock()
	if offset == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := tgbotapi.Params{"offset": strconv.FormatInt(offset, 10), "timeout": "0", "limit": "1"}
	if err := a.api.callInto(ctx, "getUpdates", p, nil); err != nil {
		a.log.Warn("telegram: confirming taken updates failed", "err", err)
	}
}
