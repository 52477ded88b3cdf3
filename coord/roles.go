package coord

import (
	"context"

	"relaybot/adapters"
)

// A Replica plays several roles, each declared by the part of the bot that takes it; cmd/bot
// hands each role to its consumer:
//
//   - the turn gate and the stop publisher (pipeline.Replicas): Enter, Wait, Leave, Elsewhere,
//     PublishStop, Shared;
//   - the stamper (pipeline.Stamper) and the fence (delivery.Options.Fence): Stamp, Fence;
//   - the tool-call claim (tools.ManagerOptions.Claim): ClaimToolCall;
//   - the prompt relay (pipeline.PromptRelay): OpenPrompt, ClosePrompt, CarryAnswer;
//   - the ledger (adapters.Ledger), the poller lease (adapters.Lease), the shards
//     (adapters.Shards) and the question book (adapters.QuestionBook): Ledger, PollLease,
//     Shards, Questions;
//   - the web relay (web.Relay): WebRelay;
//   - a delivery engine's shared chats and replies in flight (delivery.SharedChats,
//     delivery.InFlight): SharedChats, InFlight;
//   - the engine registration: AddEngine, AddQuestionCloser (before Run).
//
// A single process on SQLite plays none of them: each consumer's zero value is the process
// alone (it takes every message, polls, connects every shard, receives every press, paces every
// chat in memory and never fences), and FileLock keeps a second process off its file.

// Stopper is the pipeline as the stops of other replicas reach it (*pipeline.Pipeline).
type Stopper interface {
	// StopFromReplica stops the turn of conversation key this process runs when the asker
	// may stop it, and reports whether it did.
	StopFromReplica(key, userID string, admin bool) bool
	// InterruptFromReplica cancels the turn of conversation key this process runs because a
	// newer message of it reached another replica, and reports whether it did.
	InterruptFromReplica(key string) bool
}

// Engine is a bot's delivery engine as the replica drives it (*delivery.Engine).
type Engine interface {
	// ShareGlobal divides the engine's bot-wide budgets by n replicas.
	ShareGlobal(n int)
	// MarkInterrupted ends msg, a reply a replica that died was streaming, with a note.
	MarkInterrupted(ctx context.Context, msg adapters.MessageRef, shown string) error
}
