package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// consentJSON is the wire form of an audit.Consent; user_id is empty for a consent that covers
// everyone in its chat.
type consentJSON struct {
	ID        int64  `json:"id"`
	Platform  string `json:"platform"`
	ChatID    string `json:"chat_id"`
	UserID    string `json:"user_id"`
	Everyone  bool   `json:"everyone"`
	Tool      string `json:"tool"`
	Server    string `json:"server"`
	Rule      string `json:"rule"`
	GivenBy   string `json:"given_by"`
	GivenByID string `json:"given_by_id"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
}

func toConsentJSON(c audit.Consent) consentJSON {
	return consentJSON{ID: c.ID, Platform: c.Platform, ChatID: c.ChatID, UserID: c.UserID, Everyone: c.ForEveryone(),
		Tool: c.Tool, Server: c.Server, Rule: c.Rule, GivenBy: c.GivenBy, GivenByID: c.GivenByID,
		CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339), ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339)}
}

// apiConsents lists the live "always allow" answers (GET /api/v1/consents), filtered by the
// platform and chat_id query parameters; chat_id takes a chat as the pages print it
// ("telegram:-100123") or the bare id. Consents are per chat, so a thread is refused.
func (s *Server) apiConsents(w http.ResponseWriter, r *http.Request) {
	ref, err := chat.FilterRef(r.URL.Query().Get("platform"), r.URL.Query().Get("chat_id"))
	if err == nil && ref.ThreadID != "" {
		err = fmt.Errorf("consents are given per chat, not per thread: use %s", ref.Chat())
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "chat_id: "+err.Error())
		return
	}
	list, err := s.opts.Store.Consents.ListConsents(r.Context(), audit.ConsentFilter{Platform: string(ref.Platform), ChatID: ref.ChatID})
	if err != nil {
		s.log.Error("admin: list consents", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the consents could not be listed; see the bot's log")
		return
	}
	items := make([]consentJSON, len(list))
	for i, c := range list {
		items[i] = toConsentJSON(c)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// apiRevokeConsent revokes one (DELETE /api/v1/consents/{id}): 204, or 404 when there is none.
func (s *Server) apiRevokeConsent(w http.ResponseWriter, r *http.Request) {
	switch err := s.revokeConsent(r); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, audit.ErrConsentNotFound):
		writeJSONError(w, http.StatusNotFound, "no such consent")
	default:
		s.log.Error("admin: revoke consent", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the consent could not be revoked; see the bot's log")
	}
}

func (s *Server) revokeConsent(r *http.Request) error {
	cs := s.opts.Store.Consents
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return audit.ErrConsentNotFound
	}
	if err := cs.RevokeConsent(r.Context(), id); err != nil {
		return err
	}
	s.log.Info("admin: consent revoked", "consent", id)
	return nil
}

type consentsData struct {
	pageData
	Consents []audit.Consent
}

// consentsPage lists the live "always allow" answers with a revoke button each (GET
// /admin/consents).
func (s *Server) consentsPage(w http.ResponseWriter, r *http.Request) {
	data := consentsData{pageData: s.page(r, "Consents")}
	data.Nav = "consents"
	list, err := s.opts.Store.Consents.ListConsents(r.Context(), audit.ConsentFilter{})
	if err != nil {
		s.log.Error("admin: list consents", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The consents could not be listed; see the bot's log.")
		return
	}
	data.Consents = list
	s.render(w, r, http.StatusOK, "consents", data)
}

// consentRevokePage revokes one from the page's form (POST /admin/consents/{id}/revoke), which
// carries the session's CSRF token, and goes back to the list.
func (s *Server) consentRevokePage(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad revoke form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ss := sessionOf(r); s.opts.Token != "" && (ss.csrf == "" || !equalSecret(r.PostForm.Get("csrf"), ss.csrf)) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	switch err := s.revokeConsent(r); {
	case err == nil, errors.Is(err, audit.ErrConsentNotFound):
		http.Redirect(w, r, "/admin/consents", http.StatusSeeOther)
	default:
		s.log.Error("admin: revoke consent", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The consent could not be revoked; see the bot's log.")
	}
}
