package admin

import (
	"encoding/json"
	"strconv"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// turnView is one turn of a conversation as its member saw it: their message and what the bot
// showed in answer, in order. Every text is redacted as the audit log is (tools.RedactText);
// tool lines come from the audit rows, which were redacted when written and lose a forgotten
// memory's words.
type turnView struct {
	ID        int64        `json:"turn_id"`
	StartedAt time.Time    `json:"started_at"`
	UserID    string       `json:"user_id"`
	UserName  string       `json:"user_name"`
	Status    chat.Status  `json:"status"`
	Outcome   string       `json:"outcome"`
	Failure   chat.Failure `json:"failure"`
	Error     string       `json:"error"`
	// MessageID is the member's message (the anchor a search hit links to).
	MessageID int64        `json:"message_id"`
	Question  string       `json:"question"`
	Images    int          `json:"images"`
	Files     []attachment `json:"files"`
	// Sent are the files the member sent and BotFiles those the bot sent, as the turn's row
	// names them (turns saved before it kept them have none: Files and Images name what the
	// member's message says).
	Sent     []fileView `json:"sent"`
	Steps    []stepView `json:"steps"`
	BotFiles []fileView `json:"bot_files"`
	URL      string     `json:"url"` // the turn's timeline
}

// fileView is a file of a turn: its name (redacted as every text), kind, type and size, and
// the link to its bytes where the store keeps them (a picture the bot sent); Thumb says the
// page may show it as a picture.
type fileView struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	MIME  string `json:"mime"`
	Size  int64  `json:"size"`
	URL   string `json:"url,omitempty"`
	Thumb bool   `json:"-"`
}

// inlineImages are the picture types a browser shows without running anything; any other kept
// file (an SVG among them) is only ever downloaded.
var inlineImages = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// viewFiles splits a turn's files into the member's and the bot's.
func viewFiles(turnID int64, files []store.TurnFile) (sent, bot []fileView) {
	sent, bot = []fileView{}, []fileView{}
	for _, f := range files {
		v := fileView{Name: tools.RedactText(f.Name), Kind: f.Kind, MIME: f.MIME, Size: f.Size}
		if f.Kept {
			v.URL = turnFileURL(turnID, f.Seq)
			v.Thumb = inlineImages[f.MIME]
		}
		if f.FromBot {
			bot = append(bot, v)
		} else {
			sent = append(sent, v)
		}
	}
	return sent, bot
}

// turnFileURL is the admin page's link to a kept file of a turn.
func turnFileURL(turnID int64, seq int) string {
	return "/admin/turns/" + strconv.FormatInt(turnID, 10) + "/files/" + strconv.Itoa(seq)
}

// stepView is one thing the bot showed in a turn: its folded reasoning, a tool line, a question
// it asked (and the answer), or an answer.
type stepView struct {
	Kind      string `json:"kind"` // reasoning, tool, question, answer
	MessageID int64  `json:"message_id,omitempty"`
	Text      string `json:"text,omitempty"`
	// A tool line: the tool, how the call ended, its arguments in short, why it failed, and
	// the call's page.
	Tool    string       `json:"tool,omitempty"`
	Status  audit.Status `json:"status,omitempty"`
	Args    string       `json:"args,omitempty"`
	Reason  string       `json:"reason,omitempty"`
	CallURL string       `json:"call_url,omitempty"`
	// A question: its answer and who gave it.
	Answer string `json:"answer,omitempty"`
	By     string `json:"by,omitempty"`
}

// Attachments counts the files a member sent with a message, as its message names them (for
// a turn whose row names none).
func (t turnView) Attachments() int { return len(t.Files) + t.Images }

// viewTurn is how a turn reads on the conversation page.
func viewTurn(t store.TranscriptTurn) turnView {
	v := turnView{ID: t.ID, StartedAt: t.StartedAt, UserID: t.UserID, UserName: t.UserName, Status: t.Status,
		Outcome: string(store.OutcomeOf(t.Status)), Failure: t.Failure, Error: tools.RedactText(t.Error),
		URL: "/admin/turns/" + strconv.FormatInt(t.ID, 10), Files: []attachment{}, Steps: []stepView{}}
	v.Sent, v.BotFiles = viewFiles(t.ID, t.Files)
	calls := map[string]audit.Record{}
	shown := map[int64]bool{}
	for _, c := range t.Calls {
		if c.ToolCallID != "" {
			calls[c.ToolCallID] = c
		}
	}
	for i, m := range t.Messages {
		switch {
		case i == 0 && m.Role == chat.RoleUser:
			v.MessageID, v.Images = m.ID, len(m.Images)
			v.Question, v.Files = splitAttachments(tools.RedactText(m.Content))
			if v.Files == nil {
				v.Files = []attachment{}
			}
		case m.Role == chat.RoleAssistant:
			if m.Reasoning != "" {
				v.Steps = append(v.Steps, stepView{Kind: "reasoning", MessageID: m.ID, Text: tools.RedactText(m.Reasoning)})
			}
			for _, tc := range m.ToolCalls {
				if rec, ok := calls[tc.ID]; ok && !shown[rec.ID] {
					shown[rec.ID] = true
					v.Steps = append(v.Steps, toolSteps(rec)...)
					continue
				}
				args, _ := tools.Summarize(tc.Arguments)
				v.Steps = append(v.Steps, stepView{Kind: "tool", Tool: tc.Name, Args: args})
			}
			if m.Content != "" {
				v.Steps = append(v.Steps, stepView{Kind: "answer", MessageID: m.ID, Text: tools.RedactText(m.Content)})
			}
		}
	}
	// Calls the saved messages do not name (a turn cut short before its messages were saved).
	for _, c := range t.Calls {
		if !shown[c.ID] {
			v.Steps = append(v.Steps, toolSteps(c)...)
		}
	}
	return v
}

// toolSteps are a call's tool line and the questions it asked: the approval a policy asked for
// and the tool's own questions (elicitation), each with its answer.
func toolSteps(c audit.Record) []stepView {
	line := stepView{Kind: "tool", Tool: c.ToolName, Status: c.Status, CallURL: "/admin/calls/" + strconv.FormatInt(c.ID, 10)}
	line.Args, _ = tools.Summarize(c.Arguments)
	if c.Status.Failed() {
		line.Reason = c.Error
	}
	out := []stepView{line}
	if c.ApprovalRequired {
		q := stepView{Kind: "question", Text: "Allow " + c.ToolName + "?", Answer: string(c.Decision), By: c.Approver}
		if q.Answer == "" {
			q.Answer = "not answered yet"
		}
		out = append(out, q)
	}
	var asked []tools.Asked
	if c.Elicitation != "" && json.Unmarshal([]byte(c.Elicitation), &asked) == nil {
		for _, a := range asked {
			answer := string(a.Action)
			if a.Answer != "" {
				answer += ": " + a.Answer
			}
			out = append(out, stepView{Kind: "question", Text: a.Message, Answer: answer, By: a.By})
		}
	}
	return out
}
