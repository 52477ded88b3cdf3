package asking

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"relaybot/adapters"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
)

// strayRecorder writes a refused press of a question's button made outside the question's chat
// into the audit log, as a denied row of the tool that asked, so admins see who tried to answer
// one chat's question from another.
type strayRecorder struct {
	rec tools.Recorder // nil: nothing is recorded
	in  adapters.Inbound
	now func() time.Time
	log *slog.Logger
}

// stray is the Stray hook of a question about tool on server (adapters.Question.Stray); nil when
// there is no audit log. It must not block: the row is written in a goroutine of its own.
func (s strayRecorder) stray(tool, server string) func(adapters.Answer) {
	if s.rec == nil {
		return nil
	}
	return func(ans adapters.Answer) {
		go s.record(tool, server, ans)
	}
}

// strayTimeout bounds the writing of a refused press's row.
const strayTimeout = 60 * time.Second

// record writes one refused press.
func (s strayRecorder) record(tool, server string, ans adapters.Answer) {
	ctx, cancel := context.WithTimeout(context.Background(), strayTimeout)
	defer cancel()
	pressed := ans.Chat.String()
	if ans.Chat == (chat.Ref{}) {
		pressed = "a chat the platform did not name"
	}
	args, _ := json.Marshal(map[string]string{"choice": ans.Choice, "pressed_in": pressed}) // strings only: always encodes
	now := s.now().UTC()
	r := &audit.Record{
		Platform:      string(s.in.Chat.Platform),
		ChatID:        s.in.Chat.ChatID,
		UserID:        ans.UserID,
		ToolCallID:    "press_" + s.in.MessageID,
		ToolName:      tool,
		Server:        server,
		Status:        audit.StatusRunning,
		Arguments:     string(args),
		ArgumentsSize: len(args),
		StartedAt:     now,
	}
	if err := s.rec.Start(ctx, r); err != nil {
		s.log.Error("pipeline: refused press not recorded", "err", err)
		return
	}
	r.Status, r.Decision = audit.StatusDenied, audit.DecisionDenied
	r.Approver, r.ApproverID = who(ans), ans.UserID
	r.Error = "a press from " + pressed + " was refused: the question was asked in " + s.in.Chat.String()
	r.FinishedAt = now
	if err := s.rec.Finish(ctx, r); err != nil {
		s.log.Error("pipeline: refused press not recorded", "err", err)
	}
}
