package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"relaybot/chat"
	"relaybot/pipeline/memory"
)

// memoryJSON is the wire form of a remembered fact.
type memoryJSON struct {
	ID            int64  `json:"id"`
	User          string `json:"user"`
	Fact          string `json:"fact"`
	Scope         string `json:"scope"`
	Chat          string `json:"chat"`
	SourceTurn    int64  `json:"source_turn"`
	SourceMessage string `json:"source_message"`
	WrittenBy     string `json:"written_by"`
	Path          string `json:"path"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

func toMemoryJSON(f memory.Fact) memoryJSON {
	return memoryJSON{ID: f.ID, User: f.Who.String(), Fact: f.Text, Scope: f.Scope, Chat: f.Chat, SourceTurn: f.SourceTurn,
		SourceMessage: f.SourceMessage, WrittenBy: f.WrittenBy, Path: string(f.Path),
		CreatedAt: f.CreatedAt.UTC().Format(time.RFC3339), UpdatedAt: f.UpdatedAt.UTC().Format(time.RFC3339)}
}

// memoryUser reads the user query parameter: PLATFORM:ID.
func memoryUser(r *http.Request) (chat.User, error) {
	s := r.URL.Query().Get("user")
	ref, err := chat.ParseRef(s)
	if s == "" || err != nil || ref.ThreadID != "" {
		return chat.User{}, fmt.Errorf("user must be PLATFORM:ID (telegram:42), got %q", s)
	}
	return chat.User{Platform: ref.Platform, ID: ref.ChatID}, nil
}

// apiMemories lists one person's remembered facts (GET /api/v1/memories?user=PLATFORM:ID).
func (s *Server) apiMemories(w http.ResponseWriter, r *http.Request) {
	if s.recall(r.Context()).Memory == nil {
		writeJSONError(w, http.StatusNotFound, "memory is off ([memory] enabled = false)")
		return
	}
	who, err := memoryUser(r)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	facts, err := s.recall(r.Context()).Memory.List(r.Context(), who)
	if err != nil {
		s.log.Error("admin: list memories", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the facts could not be listed; see the bot's log")
		return
	}
	items := make([]memoryJSON, len(facts))
	for i, f := range facts {
		items[i] = toMemoryJSON(f)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// apiForgetMemory deletes one fact (DELETE /api/v1/memories/{id}): 204, or 404 when there is
// none. The row and its vectors are deleted, and the delete audited.
func (s *Server) apiForgetMemory(w http.ResponseWriter, r *http.Request) {
	if s.recall(r.Context()).Memory == nil {
		writeJSONError(w, http.StatusNotFound, "memory is off ([memory] enabled = false)")
		return
	}
	switch _, err := s.forgetMemory(r, "api"); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, memory.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, "no such fact")
	default:
		s.log.Error("admin: forget memory", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the fact could not be deleted; see the bot's log")
	}
}

func (s *Server) forgetMemory(r *http.Request, actor string) (memory.Fact, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return memory.Fact{}, memory.ErrNotFound
	}
	f, err := s.recall(r.Context()).Memory.ForgetByAdmin(r.Context(), id, "admin "+actor)
	if err == nil {
		s.log.Info("admin: fact forgotten", "fact", id, "user", f.Who.String())
	}
	return f, err
}

type memoriesData struct {
	pageData
	User  string
	Off   bool
	Error string
	Facts []memory.Fact
	Audit []memory.AuditEntry
}

// memoriesPage shows one person's facts, each with its source message, when and who wrote it,
// a delete button, and the person's latest memory audit entries (GET /admin/memories?user=).
func (s *Server) memoriesPage(w http.ResponseWriter, r *http.Request) {
	data := memoriesData{pageData: s.page(r, "Memory"), User: r.URL.Query().Get("user"), Off: s.recall(r.Context()).Memory == nil}
	data.Nav = "memories"
	if data.Off || data.User == "" {
		s.render(w, r, http.StatusOK, "memories", data)
		return
	}
	who, err := memoryUser(r)
	if err != nil {
		data.Error = err.Error()
		s.render(w, r, http.StatusBadRequest, "memories", data)
		return
	}
	if data.Facts, err = s.recall(r.Context()).Memory.List(r.Context(), who); err == nil {
		data.Audit, err = s.recall(r.Context()).Memory.Audit(r.Context(), who, 50)
	}
	if err != nil {
		s.log.Error("admin: list memories", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The facts could not be listed; see the bot's log.")
		return
	}
	s.render(w, r, http.StatusOK, "memories", data)
}

// memoryForgetPage deletes one fact from the page's form (POST /admin/memories/{id}/forget),
// which carries the session's CSRF token, and goes back to the person's facts.
func (s *Server) memoryForgetPage(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad forget form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ss := sessionOf(r); s.opts.Token != "" && (ss.csrf == "" || !equalSecret(r.PostForm.Get("csrf"), ss.csrf)) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	if s.recall(r.Context()).Memory == nil {
		s.errorPage(w, r, http.StatusNotFound, "Memory is off.")
		return
	}
	f, err := s.forgetMemory(r, "page")
	switch {
	case err == nil:
		http.Redirect(w, r, "/admin/memories?user="+url.QueryEscape(f.Who.String()), http.StatusSeeOther)
	case errors.Is(err, memory.ErrNotFound):
		http.Redirect(w, r, "/admin/memories", http.StatusSeeOther)
	default:
		s.log.Error("admin: forget memory", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The fact could not be deleted; see the bot's log.")
	}
}
