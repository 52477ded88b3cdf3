package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
)

// turnParams are the query parameters of the turns page and API.
var turnParams = []string{"platform", "chat", "status", "since", "until", "limit", "before"}

// maxTurnsPage is the most turns one page lists.
const maxTurnsPage = 200

// turnsQuery is a parsed turns request: the filter, and the page (turns older than before).
type turnsQuery struct {
	filter store.TurnFilter
	before int64
	limit  int
}

// parseTurns reads the turns filter: platform, chat (a chat as the pages print it, with
// "#thread" for one thread, or a bare id), status, since and until (as the audit filter),
// limit, and before (the turn id the page continues after).
func parseTurns(q url.Values, now time.Time) (turnsQuery, error) {
	var t turnsQuery
	for key := range q {
		if !slices.Contains(turnParams, key) {
			return t, fmt.Errorf("unknown parameter %q (want one of %s)", key, strings.Join(turnParams, ", "))
		}
	}
	ref, err := chat.FilterRef(q.Get("platform"), q.Get("chat"))
	if err != nil {
		return t, fmt.Errorf("chat: %w", err)
	}
	t.filter.Chat = ref
	if v := chat.Status(strings.TrimSpace(q.Get("status"))); v != "" {
		if !v.Valid() {
			return t, fmt.Errorf("status %q is not one of %s", v, joinValues(chat.Statuses))
		}
		t.filter.Status = v
	}
	if t.filter.Since, err = audit.ParseSince(q.Get("since"), now); err != nil {
		return t, fmt.Errorf("since: %w", err)
	}
	if t.filter.Until, err = audit.ParseSince(q.Get("until"), now); err != nil {
		return t, fmt.Errorf("until: %w", err)
	}
	if !t.filter.Since.IsZero() && !t.filter.Until.IsZero() && !t.filter.Since.Before(t.filter.Until) {
		return t, fmt.Errorf("since %s is not before until %s", t.filter.Since.Format(time.RFC3339), t.filter.Until.Format(time.RFC3339))
	}
	t.limit = store.DefaultTurnPage
	if v := strings.TrimSpace(q.Get("limit")); v != "" {
		if t.limit, err = strconv.Atoi(v); err != nil || t.limit <= 0 || t.limit > maxTurnsPage {
			return t, fmt.Errorf("limit %q is not a number from 1 to %d", v, maxTurnsPage)
		}
	}
	if v := strings.TrimSpace(q.Get("before")); v != "" {
		if t.before, err = strconv.ParseInt(v, 10, 64); err != nil || t.before <= 0 {
			return t, fmt.Errorf("before %q is not a turn id (a positive number)", v)
		}
	}
	return t, nil
}

// latestTurns reads one page of turns and the before value of the next page ("" on the last).
func (s *Server) latestTurns(r *http.Request, q turnsQuery) ([]store.ListedTurn, string, error) {
	turns, err := s.opts.Store.Turns.LatestTurns(r.Context(), q.filter, q.before, q.limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(turns) > q.limit {
		turns = turns[:q.limit]
		next = strconv.FormatInt(turns[q.limit-1].ID, 10)
	}
	return turns, next, nil
}

// turnJSON is a listed turn in the API's answer.
type turnJSON struct {
	ID             int64       `json:"id"`
	ConversationID int64       `json:"conversation_id"`
	Chat           string      `json:"chat"`
	Platform       string      `json:"platform"`
	ChatID         string      `json:"chat_id"`
	ThreadID       string      `json:"thread_id"`
	UserID         string      `json:"user_id"`
	UserName       string      `json:"user_name"`
	Model          string      `json:"model"`
	Status         chat.Status `json:"status"`
	Rounds         int         `json:"rounds"`
	TokensIn       int         `json:"tokens_in"`
	TokensOut      int         `json:"tokens_out"`
	Error          string      `json:"error"`
	// Failure is why the model did not answer the turn (chat.Failure); empty for the others.
	Failure    chat.Failure `json:"failure"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt *time.Time   `json:"finished_at"`
	TraceID    string       `json:"trace_id"`
}

func toTurnJSON(t store.ListedTurn) turnJSON {
	j := turnJSON{ID: t.ID, ConversationID: t.ConversationID, Chat: t.Chat.String(), Platform: string(t.Chat.Platform),
		ChatID: t.Chat.ChatID, ThreadID: t.Chat.ThreadID, UserID: t.UserID, UserName: t.UserName, Model: t.Model,
		Status: t.Status, Rounds: t.Rounds, TokensIn: t.TokensIn, TokensOut: t.TokensOut, Error: t.Error,
		Failure: t.Failure, StartedAt: t.StartedAt.UTC(), TraceID: t.TraceID}
	if !t.FinishedAt.IsZero() {
		f := t.FinishedAt.UTC()
		j.FinishedAt = &f
	}
	return j
}

// apiTurns answers GET /api/v1/turns: the newest turns across chats, filtered as the turns page
// is; next is the before value of the following page, empty on the last.
func (s *Server) apiTurns(w http.ResponseWriter, r *http.Request) {
	q, err := parseTurns(r.URL.Query(), s.now())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	turns, next, err := s.latestTurns(r, q)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	items := make([]turnJSON, len(turns))
	for i, t := range turns {
		items[i] = toTurnJSON(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next": next})
}

// turnsForm is the turns filter as its form shows it: the raw values the user typed.
type turnsForm struct {
	Platform, Chat, Status, Since, Until, Limit string
}

type turnsData struct {
	pageData
	Form      turnsForm
	Platforms []string
	Statuses  []string
	Turns     []store.ListedTurn
	Error     string
	NextURL   string // the next (older) page, empty on the last
	FirstURL  string // the newest page of the same filter, when not on it
	Filtering bool
}

// ChatURL is the turns page of one chat.
func (turnsData) ChatURL(ref chat.Ref) string { return turnsOf(ref) }

// turnsOf is the turns page of one chat (or thread).
func turnsOf(ref chat.Ref) string {
	return "/admin/turns?" + url.Values{"chat": {ref.String()}}.Encode()
}

// turnsPage lists the newest turns across chats, filtered by platform, chat, status and time,
// each linking to its timeline and its chat's turns.
func (s *Server) turnsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	form := turnsForm{Platform: q.Get("platform"), Chat: q.Get("chat"), Status: q.Get("status"),
		Since: q.Get("since"), Until: q.Get("until"), Limit: q.Get("limit")}
	title := "Turns"
	if c := strings.TrimSpace(form.Chat); c != "" {
		title = "Turns of " + c
	}
	data := turnsData{pageData: s.page(r, title), Form: form, Platforms: valuesOf(chat.Platforms),
		Statuses: valuesOf(chat.Statuses), Filtering: form != (turnsForm{})}
	data.Nav = "turns"
	tq, err := parseTurns(q, s.now())
	if err != nil {
		data.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "turns", data)
		return
	}
	turns, next, err := s.latestTurns(r, tq)
	if err != nil {
		s.pageStoreError(w, r, err)
		return
	}
	data.Turns = turns
	if next != "" {
		nq := withoutEmpty(q)
		nq.Set("before", next)
		data.NextURL = withQuery("/admin/turns", nq)
	}
	if tq.before > 0 {
		fq := withoutEmpty(q)
		fq.Del("before")
		data.FirstURL = withQuery("/admin/turns", fq)
	}
	s.render(w, r, http.StatusOK, "turns", data)
}

// withoutEmpty copies q without its empty parameters (a submitted form sends every field).
func withoutEmpty(q url.Values) url.Values {
	out := url.Values{}
	for k, vs := range q {
		if v := strings.TrimSpace(strings.Join(vs, "")); v != "" {
			out.Set(k, v)
		}
	}
	return out
}
