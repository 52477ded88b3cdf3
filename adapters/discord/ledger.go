package discord

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
)

// messageKey names a message in the deployment's ledger.
func messageKey(id string) string { return "message:" + id }

// ledger is Options.Ledger as the adapter uses it: which replica takes a message or an
// interaction, and with a Journal what it keeps of a message until its turn ends.
type ledger struct {
	l   adapters.Ledger // nil takes everything
	log *slog.Logger
}

// taken reports whether this replica answers the message or interaction key: with a Ledger
// (several replicas) only the one that records it first does. A failed record answers, as the
// pipeline answers a message it cannot check: twice is better than never.
func (l *ledger) taken(ctx context.Context, key string) bool {
	return l.claim(ctx, key, nil)
}

// claim is taken keeping payload with the record when the Ledger is a Journal.
func (l *ledger) claim(ctx context.Context, key string, payload []byte) bool {
	if l.l == nil {
		return true
	}
	var first bool
	var err error
	if j, ok := l.l.(adapters.Journal); ok && payload != nil {
		first, err = j.ClaimPayload(ctx, "discord", key, payload)
	} else {
		first, err = l.l.Claim(ctx, "discord", key)
	}
	if err != nil {
		l.log.Warn("discord: inbound ledger unavailable; answering", "key", key, "err", err)
		return true
	}
	return first
}

// keptMessage is what the Journal keeps of a message until its turn ends: what the pipeline
// needs to answer it, should the replica answering it die mid-turn. Discord does not send a
// message again, so this is the only copy; images are fetched again from their attachments.
type keptMessage struct {
	V           int                            `json:"v"`
	In          adapters.Inbound               `json:"in"`
	Attachments []*discordgo.MessageAttachment `json:"attachments,omitempty"`
	Flags       discordgo.MessageFlags         `json:"flags,omitempty"`
}

// takeMessage reports whether this replica answers message m, read as in: with a Journal the
// message is kept with the claim.
func (b *inbox) takeMessage(ctx context.Context, in adapters.Inbound, m *discordgo.Message) bool {
	var payload []byte
	if _, ok := b.ledger.l.(adapters.Journal); ok {
		k := keptMessage{V: 1, In: in, Attachments: m.Attachments, Flags: m.Flags}
		k.In.Images, k.In.Attachments = nil, nil
		if raw, err := json.Marshal(k); err == nil {
			payload = raw
		}
	}
	return b.ledger.claim(ctx, messageKey(m.ID), payload)
}

// doneMessage records in the Journal that message id's turn has ended.
func (b *inbox) doneMessage(id string) {
	j, ok := b.ledger.l.(adapters.Journal)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j.Done(ctx, "discord", messageKey(id)); err != nil {
		b.log.Warn("discord: inbound ledger not updated; a survivor may answer this message again", "message", id, "err", err)
	}
}

// adoptOrphans, with a Journal, answers the messages that replicas which died took and did not
// finish (marked Redelivered: the pipeline answers one whose turn never ended ok; with the
// deployment's count of adoptions as Redeliveries: a second adoption gets a notice). It stops with
// ctx; wg waits for it.
func (b *inbox) adoptOrphans(ctx context.Context, h adapters.Handler, wg *sync.WaitGroup) {
	adapters.AdoptOrphans(ctx, wg, b.ledger.l, "discord", b.log, func(key string, raw []byte, adoptions int) {
		id, ok := strings.CutPrefix(key, "message:")
		var k keptMessage
		if !ok || json.Unmarshal(raw, &k) != nil || k.V != 1 {
			b.log.Warn("discord: undecodable message of a replica that is gone skipped", "key", key)
			b.doneMessage(id)
			return
		}
		b.log.Info("discord: answering a message a replica that died did not finish", "message", id)
		in := k.In
		in.Redelivered, in.Redeliveries = true, adoptions
		b.work.spawn(func() {
			defer b.doneMessage(id)
			in.Images = b.images(ctx, k.Attachments)
			in.Attachments = b.attachments(&discordgo.Message{Flags: k.Flags, Attachments: k.Attachments})
			h.Handle(ctx, in, b.responderFor(in, id))
		})
	})
}
