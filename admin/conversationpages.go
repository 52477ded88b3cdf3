package admin

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// conversationsForm is the conversations filter as its form shows it: the raw values typed.
type conversationsForm struct {
	Q, Platform, Chat, Person, Status, Since, Until, Limit string
}

// hitView is a found message as the search page shows it.
type hitView struct {
	store.MessageHit
	Parts []textPart // the excerpt, the words found marked
	URL   string
}

type conversationsData struct {
	pageData
	Form          conversationsForm
	Platforms     []string
	Outcomes      []string
	Conversations []store.ListedConversation
	Hits          []hitView
	Searching     bool
	Error         string
	OlderURL      string // the next (older) page, empty on the last
	NewerURL      string // the page before (newer), empty on the first
	Filtering     bool
}

// URL is a listed conversation's page.
func (conversationsData) URL(id int64) string { return conversationURL(id) }

// Opening is a listed conversation's first message as the list shows it.
func (conversationsData) Opening(text string) string { return openingOf(text) }

// conversationsPage lists conversations across chats (the one spoken in last first), or with q
// the messages holding its words, filtered by platform, chat, person, outcome and time.
func (s *Server) conversationsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	form := conversationsForm{Q: q.Get("q"), Platform: q.Get("platform"), Chat: q.Get("chat"), Person: q.Get("person"),
		Status: q.Get("status"), Since: q.Get("since"), Until: q.Get("until"), Limit: q.Get("limit")}
	filters := form
	filters.Q = ""
	data := conversationsData{pageData: s.page(r, "Conversations"), Form: form, Platforms: valuesOf(chat.Platforms),
		Outcomes: valuesOf(store.Outcomes), Filtering: filters != (conversationsForm{})}
	data.Nav = "conversations"
	cq, err := parseConversations(q, s.now())
	if err != nil {
		data.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "conversations", data)
		return
	}
	var older, newer string
	if cq.text != "" {
		data.Searching, data.Title = true, "Search: "+cq.text
		page, err := s.opts.Store.Transcripts.SearchMessages(r.Context(), cq.text, cq.filter, cq.page)
		if err != nil {
			s.conversationsError(w, r, err)
			return
		}
		words := store.SearchWords(cq.text)
		for _, h := range page.Items {
			data.Hits = append(data.Hits, hitView{MessageHit: h, URL: hitURL(h),
				Parts: highlight(excerpt(tools.RedactText(h.Text), words, hitRunes), words)})
		}
		older, newer = pageKeys(page)
	} else {
		page, err := s.opts.Store.Transcripts.Conversations(r.Context(), cq.filter, cq.page)
		if err != nil {
			s.conversationsError(w, r, err)
			return
		}
		data.Conversations = page.Items
		older, newer = pageKeys(page)
	}
	data.OlderURL, data.NewerURL = besideURLs("/admin/conversations", q, older, newer)
	s.render(w, r, http.StatusOK, "conversations", data)
}

// besideURLs are the links to the older and newer pages of a list at path with query q.
func besideURLs(path string, q url.Values, older, newer string) (olderURL, newerURL string) {
	for _, e := range []struct {
		key, val string
		to       *string
	}{{"before", older, &olderURL}, {"after", newer, &newerURL}} {
		if e.val == "" {
			continue
		}
		nq := withoutEmpty(q)
		nq.Del("before")
		nq.Del("after")
		nq.Del("from")
		nq.Set(e.key, e.val)
		*e.to = withQuery(path, nq)
	}
	return olderURL, newerURL
}

// conversationsError shows a store failure on a conversations page.
func (s *Server) conversationsError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.errorPage(w, r, http.StatusNotFound, "There is no such conversation (retention may have deleted it).")
	case errors.Is(err, store.ErrNoSearchWords):
		s.errorPage(w, r, http.StatusBadRequest, "The search has no word to look for.")
	default:
		s.log.Error("admin: store query failed", "path", r.URL.Path, "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The conversations could not be read; see the bot's log.")
	}
}

type conversationData struct {
	pageData
	Conv       store.ListedConversation
	Turns      []turnView
	EarlierURL string
	LaterURL   string
	TurnsURL   string
}

// conversationPage shows one conversation as its members saw it, a page of turns at a time
// (the newest by default; before and after page through them, from starts at a turn).
func (s *Server) conversationPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.errorPage(w, r, http.StatusNotFound, "There is no such conversation.")
		return
	}
	q := r.URL.Query()
	p, err := parsePaging(q)
	if err == nil {
		for key := range q {
			if key != "before" && key != "after" && key != "from" && key != "limit" {
				err = errors.New("unknown parameter " + strconv.Quote(key) + " (want before, after, from or limit)")
			}
		}
	}
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, err.Error())
		return
	}
	tr, err := s.opts.Store.Transcripts.Transcript(r.Context(), id, p)
	if err != nil {
		s.conversationsError(w, r, err)
		return
	}
	data := conversationData{pageData: s.page(r, "Conversation "+strconv.FormatInt(id, 10)+" · "+tr.Conversation.Chat.String()),
		Conv: tr.Conversation, TurnsURL: turnsOf(tr.Conversation.Chat)}
	data.Nav = "conversations"
	for _, t := range tr.Turns {
		data.Turns = append(data.Turns, viewTurn(t))
	}
	page := store.Page[store.TranscriptTurn]{Older: tr.Earlier, Newer: tr.Later}
	older, newer := pageKeys(page)
	data.EarlierURL, data.LaterURL = besideURLs(conversationURL(id), q, older, newer)
	s.render(w, r, http.StatusOK, "conversation", data)
}

// apiConversation answers GET /api/v1/conversations/{id}: one conversation and a page of its
// turns as the page shows them (before, after and limit as the page takes them).
func (s *Server) apiConversation(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeJSONError(w, http.StatusNotFound, "not found")
		return
	}
	p, err := parsePaging(r.URL.Query())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	tr, err := s.opts.Store.Transcripts.Transcript(r.Context(), id, p)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	turns := make([]turnView, len(tr.Turns))
	for i, t := range tr.Turns {
		turns[i] = viewTurn(t)
	}
	older, newer := pageKeys(store.Page[store.TranscriptTurn]{Older: tr.Earlier, Newer: tr.Later})
	writeJSON(w, http.StatusOK, map[string]any{"conversation": toConversationJSON(tr.Conversation), "turns": turns,
		"earlier": older, "later": newer})
}

// turnFilePage answers GET /admin/turns/{id}/files/{seq}: the bytes of a file of a turn the
// store keeps (a picture the bot sent). A picture of a type browsers only draw is shown in
// place; any other kept file is a download, and neither may run anything (nosniff, a sandbox).
func (s *Server) turnFilePage(w http.ResponseWriter, r *http.Request) {
	id, err1 := strconv.ParseInt(r.PathValue("id"), 10, 64)
	seq, err2 := strconv.Atoi(r.PathValue("seq"))
	if err1 != nil || err2 != nil || id <= 0 || seq < 0 {
		s.errorPage(w, r, http.StatusNotFound, "No such file.")
		return
	}
	f, err := s.opts.Store.Transcripts.TurnFile(r.Context(), id, seq)
	if errors.Is(err, store.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound, "There is no such file (retention may have deleted its turn).")
		return
	}
	if err != nil {
		s.conversationsError(w, r, err)
		return
	}
	if f.Data == nil {
		s.errorPage(w, r, http.StatusNotFound, "The bot does not keep this file's bytes: only the pictures it sent are kept.")
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	disposition := "attachment"
	h.Set("Content-Type", "application/octet-stream")
	if inlineImages[f.MIME] {
		disposition = "inline"
		h.Set("Content-Type", f.MIME)
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": f.Name}))
	_, _ = w.Write(f.Data)
}
