package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"relaybot/pipeline/knowledge"
)

// importTimeout bounds one upload's import once its bytes are in: it goes on when the client
// leaves, so a document is stored whole or not at all.
const importTimeout = 10 * time.Minute

// knowledgeBase returns the base the path names, writing the API's 404 when there is none.
// With orphans, a base config.toml no longer names that still holds documents is one too (its
// documents are listed and deleted like any base's).
func (s *Server) knowledgeBase(w http.ResponseWriter, r *http.Request, orphans bool) (string, bool) {
	if s.recall(r.Context()).Knowledge == nil {
		writeJSONError(w, http.StatusNotFound, "no knowledge base is configured ([[knowledge.bases]])")
		return "", false
	}
	name := r.PathValue("base")
	if _, ok := s.recall(r.Context()).Knowledge.Base(name); ok {
		return name, true
	}
	if orphans {
		if _, ok := s.orphan(r.Context(), name); ok {
			return name, true
		}
	}
	writeJSONError(w, http.StatusNotFound, fmt.Sprintf("no knowledge base %q", name))
	return "", false
}

// orphan returns the documents of name when it is a base config.toml no longer names.
func (s *Server) orphan(ctx context.Context, name string) (knowledge.Orphan, bool) {
	orphans, err := s.recall(ctx).Knowledge.Orphans(ctx)
	if err != nil {
		s.log.Warn("admin: list orphaned knowledge documents", "err", err)
		return knowledge.Orphan{}, false
	}
	for _, o := range orphans {
		if o.Base == name {
			return o, true
		}
	}
	return knowledge.Orphan{}, false
}

// apiKnowledgeDocuments lists a base's documents (GET /api/v1/knowledge/{base}/documents); a
// base config.toml no longer names lists its documents too, with "orphan": true.
func (s *Server) apiKnowledgeDocuments(w http.ResponseWriter, r *http.Request) {
	base, ok := s.knowledgeBase(w, r, true)
	if !ok {
		return
	}
	if _, configured := s.recall(r.Context()).Knowledge.Base(base); !configured {
		o, _ := s.orphan(r.Context(), base)
		if o.Documents == nil {
			o.Documents = []knowledge.Document{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": o.Documents, "keywords_only": s.recall(r.Context()).Knowledge.Keywords(), "orphan": true,
			"fix": fmt.Sprintf("bot knowledge rename -from %s -to NEW_NAME moves them to the base's new name", base)})
		return
	}
	docs, err := s.recall(r.Context()).Knowledge.Documents(r.Context(), base)
	if err != nil {
		s.log.Error("admin: list knowledge documents", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the documents could not be listed; see the bot's log")
		return
	}
	if docs == nil {
		docs = []knowledge.Document{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": docs, "keywords_only": s.recall(r.Context()).Knowledge.Keywords()})
}

// apiKnowledgeUpload reads the multipart field "file" into a base (POST
// /api/v1/knowledge/{base}/documents): 201 with the document, or the refusal (writeRefusal),
// with nothing stored.
func (s *Server) apiKnowledgeUpload(w http.ResponseWriter, r *http.Request) {
	base, ok := s.knowledgeBase(w, r, false)
	if !ok {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "want a multipart/form-data body with the field \"file\"")
		return
	}
	d, err := s.importPart(r.Context(), mr, base, "api", nil)
	var ref *knowledge.RefusedError
	switch {
	case err == nil:
		writeJSON(w, http.StatusCreated, d)
	case errors.As(err, &ref):
		writeRefusal(w, ref)
	case errors.Is(err, errNoFile):
		writeJSONError(w, http.StatusBadRequest, err.Error())
	default:
		s.log.Error("admin: knowledge upload", "base", base, "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the document could not be stored; see the bot's log")
	}
}

// writeRefusal answers an upload refused with nothing stored: 413 when the file is over
// knowledge.max_file_bytes, 422 for the other limits and for a format the bases do not read;
// the body names the limit ("limit", as config.toml names it) and its value ("limit_value").
func writeRefusal(w http.ResponseWriter, ref *knowledge.RefusedError) {
	status := http.StatusUnprocessableEntity
	if ref.Key == "knowledge.max_file_bytes" {
		status = http.StatusRequestEntityTooLarge
	}
	body := map[string]any{"error": ref.Error(), "limit": ref.Key}
	if ref.Key != "" {
		body["limit_value"] = ref.Limit
	}
	writeJSON(w, status, body)
}

// knowledgeTooLarge refuses an upload whose declared length is already over
// knowledge.max_file_bytes, before a byte of its body is read: the API's refusal, or the page
// saying so. It reports false (nothing written) when the length is not over that limit.
func (s *Server) knowledgeTooLarge(w http.ResponseWriter, r *http.Request) bool {
	if s.recall(r.Context()).Knowledge == nil {
		return false
	}
	ref := s.recall(r.Context()).Knowledge.CheckSize("the upload", r.ContentLength)
	if ref == nil {
		return false
	}
	w.Header().Set("Connection", "close")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeRefusal(w, ref)
		return true
	}
	// The router has not run yet: the base is the path's.
	base := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/admin/knowledge/"), "/documents")
	q := url.Values{"base": {base}, "error": {ref.Error()}}
	http.Redirect(w, r, "/admin/knowledge?"+q.Encode(), http.StatusSeeOther)
	return true
}

var (
	errNoFile = errors.New(`the form has no field "file"`)
	errCSRF   = errors.New("missing or wrong CSRF token")
)

// importPart reads the parts of mr up to the field "file" and imports it; before is given the
// fields before the file (the page's CSRF token) and may refuse the upload, nil taking any.
func (s *Server) importPart(ctx context.Context, mr *multipart.Reader, base, by string, before func(fields url.Values) error) (knowledge.Document, error) {
	fields := url.Values{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return knowledge.Document{}, errNoFile
		}
		if err != nil {
			return knowledge.Document{}, fmt.Errorf("read the form: %w", err)
		}
		if p.FormName() != "file" {
			v, _ := io.ReadAll(io.LimitReader(p, 4<<10))
			fields.Add(p.FormName(), string(v))
			continue
		}
		if before != nil {
			if err := before(fields); err != nil {
				return knowledge.Document{}, err
			}
		}
		name := filepath.Base(strings.ReplaceAll(p.FileName(), `\`, "/"))
		if name == "" || name == "." || name == "/" {
			name = "upload"
		}
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), importTimeout)
		defer cancel()
		return s.recall(ctx).Knowledge.Add(ictx, base, name, p, by, nil)
	}
}

// apiKnowledgeRemove deletes one of a base's documents (DELETE
// /api/v1/knowledge/{base}/documents/{id}), a base config.toml no longer names too: 204, or 404.
func (s *Server) apiKnowledgeRemove(w http.ResponseWriter, r *http.Request) {
	base, ok := s.knowledgeBase(w, r, true)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	d, err := s.recall(r.Context()).Knowledge.Remove(r.Context(), base, id)
	switch {
	case err == nil:
		s.log.Info("admin: knowledge document removed", "base", base, "document", id, "name", d.Name)
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, knowledge.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, "no such document")
	default:
		s.log.Error("admin: knowledge remove", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the document could not be removed; see the bot's log")
	}
}

// apiKnowledgeSearch is what the bot would find (GET /api/v1/knowledge/{base}/search?q=).
func (s *Server) apiKnowledgeSearch(w http.ResponseWriter, r *http.Request) {
	base, ok := s.knowledgeBase(w, r, false)
	if !ok {
		return
	}
	q := r.URL.Query().Get("q")
	if strings.TrimSpace(q) == "" {
		writeJSONError(w, http.StatusBadRequest, "q must be set")
		return
	}
	hits, err := s.recall(r.Context()).Knowledge.Search(r.Context(), []string{base}, q, 5, nil)
	if err != nil {
		s.log.Error("admin: knowledge search", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the search failed; see the bot's log")
		return
	}
	if hits == nil {
		hits = []knowledge.Hit{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": hits, "keywords_only": s.recall(r.Context()).Knowledge.Keywords()})
}

type knowledgeData struct {
	pageData
	Off      bool
	Keywords bool
	Bases    []knowledgeBaseData
	// Orphans are the bases config.toml no longer names that hold documents.
	Orphans []knowledgeOrphanData
	// Vectors is the re-embedding's progress (chunks with a vector of Space, of Chunks).
	Vectors, Chunks int
	Space           string
	Base, Query     string
	Hits            []knowledge.Hit
	Error, Notice   string
}

type knowledgeBaseData struct {
	knowledge.Base
	Documents []knowledge.Document
	// CSRF is the session's token, for the documents' delete forms.
	CSRF string
}

type knowledgeOrphanData struct {
	knowledge.Orphan
	CSRF string
}

// knowledgePage lists every base with its documents, an upload form and a delete button per
// document, and tries a search (GET /admin/knowledge?base=&q=).
func (s *Server) knowledgePage(w http.ResponseWriter, r *http.Request) {
	data := knowledgeData{pageData: s.page(r, "Knowledge"), Off: s.recall(r.Context()).Knowledge == nil,
		Base: r.URL.Query().Get("base"), Query: r.URL.Query().Get("q"), Error: r.URL.Query().Get("error"), Notice: r.URL.Query().Get("added")}
	data.Nav = "knowledge"
	if data.Off {
		s.render(w, r, http.StatusOK, "knowledge", data)
		return
	}
	k := s.recall(r.Context()).Knowledge
	ctx := r.Context()
	data.Keywords = k.Keywords()
	for _, b := range k.Bases() {
		docs, err := k.Documents(ctx, b.Name)
		if err != nil {
			s.log.Error("admin: list knowledge documents", "err", err)
			s.errorPage(w, r, http.StatusInternalServerError, "The documents could not be listed; see the bot's log.")
			return
		}
		data.Bases = append(data.Bases, knowledgeBaseData{Base: b, Documents: docs, CSRF: data.CSRF})
	}
	orphans, err := k.Orphans(ctx)
	if err != nil {
		s.log.Error("admin: list orphaned knowledge documents", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The documents could not be listed; see the bot's log.")
		return
	}
	for _, o := range orphans {
		data.Orphans = append(data.Orphans, knowledgeOrphanData{Orphan: o, CSRF: data.CSRF})
	}
	if !data.Keywords {
		done, total, space, err := k.VectorProgress(ctx)
		if err != nil {
			s.log.Warn("admin: the embeddings' progress", "err", err)
		}
		data.Vectors, data.Chunks, data.Space = done, total, space.String()
	}
	if data.Base != "" && strings.TrimSpace(data.Query) != "" {
		hits, err := k.Search(ctx, []string{data.Base}, data.Query, 5, nil)
		if err != nil {
			data.Error = err.Error()
		}
		data.Hits = hits
	}
	s.render(w, r, http.StatusOK, "knowledge", data)
}

// knowledgeUploadPage imports the page's upload form (POST /admin/knowledge/{base}/documents),
// whose CSRF token comes before the file, and goes back to the page saying what became of it.
func (s *Server) knowledgeUploadPage(w http.ResponseWriter, r *http.Request) {
	if s.recall(r.Context()).Knowledge == nil {
		s.errorPage(w, r, http.StatusNotFound, "No knowledge base is configured.")
		return
	}
	base := r.PathValue("base")
	mr, err := r.MultipartReader()
	if err != nil {
		http.Error(w, "bad upload form: "+err.Error(), http.StatusBadRequest)
		return
	}
	ss := sessionOf(r)
	d, err := s.importPart(r.Context(), mr, base, "admin page", func(fields url.Values) error {
		if s.opts.Token != "" && (ss.csrf == "" || !equalSecret(fields.Get("csrf"), ss.csrf)) {
			return errCSRF
		}
		return nil
	})
	if errors.Is(err, errCSRF) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	q := url.Values{"base": {base}}
	var ref *knowledge.RefusedError
	switch {
	case err == nil:
		q.Set("added", fmt.Sprintf("Added %s: %d chunks.", d.Name, d.Chunks))
	case errors.As(err, &ref), errors.Is(err, errNoFile), errors.Is(err, knowledge.ErrNoBase):
		q.Set("error", err.Error())
	default:
		s.log.Error("admin: knowledge upload", "base", base, "err", err)
		q.Set("error", "The document could not be stored; see the bot's log.")
	}
	http.Redirect(w, r, "/admin/knowledge?"+q.Encode(), http.StatusSeeOther)
}

// knowledgeRemovePage deletes a document from the page's form (POST
// /admin/knowledge/{base}/documents/{id}/delete), which carries the session's CSRF token.
func (s *Server) knowledgeRemovePage(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad delete form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ss := sessionOf(r); s.opts.Token != "" && (ss.csrf == "" || !equalSecret(r.PostForm.Get("csrf"), ss.csrf)) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	if s.recall(r.Context()).Knowledge == nil {
		s.errorPage(w, r, http.StatusNotFound, "No knowledge base is configured.")
		return
	}
	base := r.PathValue("base")
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if _, err := s.recall(r.Context()).Knowledge.Remove(r.Context(), base, id); err != nil && !errors.Is(err, knowledge.ErrNotFound) {
		s.log.Error("admin: knowledge remove", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The document could not be removed; see the bot's log.")
		return
	}
	http.Redirect(w, r, "/admin/knowledge?base="+url.QueryEscape(base), http.StatusSeeOther)
}

// knowledgeUpload says whether r is an upload of a knowledge base's document, whose body may be
// as large as KnowledgeUploadBytes.
func knowledgeUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/documents") &&
		(strings.HasPrefix(r.URL.Path, "/api/v1/knowledge/") || strings.HasPrefix(r.URL.Path, "/admin/knowledge/"))
}
