package discord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxContent is Discord's limit on message content, in Unicode code points.
const maxContent = 2000

// Discord JSON error codes used by the server.
const (
	codeUnknownChannel     = 10003
	codeUnknownMessage     = 10008
	codeUnknownMember      = 10007
	codeUnknownInteraction = 10062
	codeEmptyMessage       = 50006
	codeInvalidFormBody    = 50035
	codeAlreadyAcked       = 40060
	codeEntityTooLarge     = 40005
	codeMissingPermissions = 50013
	codeArchivedThread     = 50083
	codeThreadExists       = 160004
)

// request is a parsed REST request.
type request struct {
	route     Route
	parts     []string
	channelID string
	messageID string
	body      []byte
	fields    map[string]json.RawMessage
	files     []Attachment
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if websocketUpgrade(r) {
		s.serveGateway(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/attachments/") {
		s.serveAttachment(w, r)
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v10/")
	if !ok {
		writeError(w, http.StatusNotFound, 0, "404: Not Found")
		return
	}
	req := &request{parts: strings.Split(strings.TrimSuffix(path, "/"), "/")}
	req.route, req.channelID, req.messageID = classify(r.Method, req.parts)

	if err := readBody(r, req); err != nil {
		s.finish(w, r, req, http.StatusBadRequest, 0, errorBody(codeInvalidFormBody, err.Error()), nil)
		return
	}
	// Interaction callbacks and webhook routes are authorised by their token, not the bot token.
	tokenAuth := req.route == RouteInteractionCallback || strings.HasPrefix(string(req.route), "webhook_")
	if !tokenAuth && r.Header.Get("Authorization") != "Bot "+s.cfg.Token {
		s.finish(w, r, req, http.StatusUnauthorized, 0, errorBody(0, "401: Unauthorized"), nil)
		return
	}
	s.handle(w, r, req)
}

func websocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func classify(method string, p []string) (Route, string, string) {
	switch {
	case len(p) >= 1 && p[0] == "gateway" && method == http.MethodGet:
		return RouteGateway, "", ""
	case len(p) == 2 && p[0] == "channels" && method == http.MethodGet:
		return RouteGetChannel, p[1], ""
	case len(p) == 2 && p[0] == "channels" && method == http.MethodPatch:
		return RouteModifyChannel, p[1], ""
	case len(p) == 5 && p[0] == "channels" && p[2] == "messages" && p[4] == "threads" && method == http.MethodPost:
		return RouteStartThread, p[1], p[3]
	case len(p) == 4 && p[0] == "guilds" && p[2] == "members" && method == http.MethodGet:
		return RouteGetMember, p[1], p[3] // guild id and user id
	case len(p) == 3 && p[0] == "channels" && p[2] == "messages" && method == http.MethodPost:
		return RouteCreateMessage, p[1], ""
	case len(p) == 4 && p[0] == "channels" && p[2] == "messages" && method == http.MethodPatch:
		return RouteEditMessage, p[1], p[3]
	case len(p) == 4 && p[0] == "channels" && p[2] == "messages" && method == http.MethodDelete:
		return RouteDeleteMessage, p[1], p[3]
	case len(p) == 3 && p[0] == "channels" && p[2] == "typing" && method == http.MethodPost:
		return RouteTyping, p[1], ""
	case len(p) >= 3 && p[0] == "applications" && p[len(p)-1] == "commands" && method == http.MethodPut:
		return RouteCommands, "", ""
	case len(p) == 4 && p[0] == "interactions" && p[3] == "callback" && method == http.MethodPost:
		return RouteInteractionCallback, "", ""
	case len(p) == 5 && p[0] == "webhooks" && p[3] == "messages" && method == http.MethodPatch:
		return RouteWebhookEdit, "", p[4]
	case len(p) == 5 && p[0] == "webhooks" && p[3] == "messages" && method == http.MethodDelete:
		return RouteWebhookDelete, "", p[4]
	case len(p) == 3 && p[0] == "webhooks" && method == http.MethodPost:
		return RouteWebhookFollowup, "", ""
	}
	return RouteOther, "", ""
}

// readBody reads a JSON body or a multipart body with payload_json and files[n] parts.
func readBody(r *http.Request, req *request) error {
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("reading multipart body: %w", err)
			}
			data, err := io.ReadAll(part)
			if err != nil {
				return fmt.Errorf("reading multipart part %q: %w", part.FormName(), err)
			}
			switch name := part.FormName(); {
			case name == "payload_json":
				req.body = data
			case strings.HasPrefix(name, "files["):
				req.files = append(req.files, Attachment{
					Filename:    part.FileName(),
					ContentType: part.Header.Get("Content-Type"),
					Data:        data,
				})
			default:
				return fmt.Errorf("unexpected multipart field %q", name)
			}
		}
	} else {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return fmt.Errorf("reading body: %w", err)
		}
		req.body = data
	}
	if b := bytes.TrimSpace(req.body); len(b) > 0 && b[0] != '[' {
		if err := json.Unmarshal(req.body, &req.fields); err != nil {
			return fmt.Errorf("body is not a JSON object: %w", err)
		}
	}
	return nil
}

func errorBody(code int, msg string) any {
	return map[string]any{"code": code, "message": msg}
}

func writeError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, errorBody(code, msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if v == nil {
		w.WriteHeader(status)
		return
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// finish records the call and writes the answer. retryAfter is set for 429s.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, req *request, status int, retryAfter time.Duration, body any, hdr http.Header) {
	s.mu.Lock()
	c := Call{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path, Route: req.route,
		ChannelID: req.channelID, MessageID: req.messageID, Status: status,
		RetryAfter: retryAfter, Body: req.body, Files: req.files,
	}
	if am, ok := req.fields["allowed_mentions"]; ok && string(am) != "null" {
		c.AllowedMentions = am
	}
	s.calls = append(s.calls, c)
	s.notifyLocked()
	s.mu.Unlock()
	for k, vs := range hdr {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, req *request) {
	s.mu.Lock()
	if f, ok := s.takeFaultLocked(req.route); ok {
		s.mu.Unlock()
		if f.html {
			s.finishHTML(w, r, req, f)
			return
		}
		s.finish(w, r, req, f.status, 0, errorBody(0, http.StatusText(f.status)), nil)
		return
	}
	tokenAuth := req.route == RouteInteractionCallback || strings.HasPrefix(string(req.route), "webhook_")
	if !tokenAuth {
		if retry, limited := s.spendGlobalLocked(); limited {
			s.mu.Unlock()
			hdr := http.Header{}
			hdr.Set("X-RateLimit-Global", "true")
			hdr.Set("X-RateLimit-Scope", "global")
			hdr.Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
			s.finish(w, r, req, http.StatusTooManyRequests, retry, map[string]any{
				"message": "You are being rate limited.", "retry_after": retry.Seconds(), "global": true,
			}, hdr)
			return
		}
	}
	for _, f := range req.files {
		if len(f.Data) > s.cfg.MaxUploadBytes {
			s.mu.Unlock()
			s.finish(w, r, req, http.StatusRequestEntityTooLarge, 0, errorBody(codeEntityTooLarge, "Request entity too large"), nil)
			return
		}
	}
	var hdr http.Header
	if req.route == RouteCreateMessage || req.route == RouteEditMessage || req.route == RouteStartThread || req.route == RouteModifyChannel {
		var retry time.Duration
		var limited bool
		hdr, retry, limited = s.spendLocked(req.channelID)
		if limited {
			s.mu.Unlock()
			s.finish(w, r, req, http.StatusTooManyRequests, retry, map[string]any{
				"message": "You are being rate limited.", "retry_after": retry.Seconds(), "global": false,
			}, hdr)
			return
		}
	}
	status, body := s.apply(r, req)
	s.mu.Unlock()
	s.finish(w, r, req, status, 0, body, hdr)
}

func (s *Server) takeFaultLocked(route Route) (fault, bool) {
	for i, f := range s.faults {
		if f.route == route && f.n > 0 {
			f.n--
			if f.n == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			return *f, true
		}
	}
	return fault{}, false
}

// finishHTML records the call and answers with an HTML error page, as a proxy in front of
// Discord does, with a Retry-After header in whole seconds when f.retryAfter is set.
func (s *Server) finishHTML(w http.ResponseWriter, r *http.Request, req *request, f fault) {
	var retry time.Duration
	if f.retryAfter > 0 {
		secs := int(math.Ceil(f.retryAfter.Seconds()))
		retry = time.Duration(secs) * time.Second
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path, Route: req.route,
		ChannelID: req.channelID, MessageID: req.messageID, Status: f.status,
		RetryAfter: retry, Body: req.body, Files: req.files,
	})
	s.notifyLocked()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.WriteHeader(f.status)
	_, _ = fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><title>Error %d</title></head><body><h1>%d %s</h1><p>You are being rate limited.</p></body></html>\n",
		f.status, f.status, http.StatusText(f.status))
}

// spendGlobalLocked charges one request to the bot's global bucket (a fixed window).
func (s *Server) spendGlobalLocked() (time.Duration, bool) {
	now := time.Now()
	if !now.Before(s.global.resetAt) {
		s.global = bucket{resetAt: now.Add(s.cfg.GlobalWindow)}
	}
	if s.global.count >= s.cfg.GlobalN {
		return s.global.resetAt.Sub(now), true
	}
	s.global.count++
	return 0, false
}

// spendLocked charges one request to the channel's bucket. Discord's buckets are fixed windows:
// the window starts with the first request after a reset and resets BudgetWindow later.
func (s *Server) spendLocked(channelID string) (http.Header, time.Duration, bool) {
	now := time.Now()
	b := s.buckets[channelID]
	if b == nil || !now.Before(b.resetAt) {
		b = &bucket{resetAt: now.Add(s.cfg.BudgetWindow)}
		s.buckets[channelID] = b
	}
	hdr := http.Header{}
	hdr.Set("X-RateLimit-Limit", strconv.Itoa(s.cfg.BudgetN))
	hdr.Set("X-RateLimit-Bucket", "channel-messages-"+channelID)
	resetAfter := b.resetAt.Sub(now)
	hdr.Set("X-RateLimit-Reset-After", strconv.FormatFloat(resetAfter.Seconds(), 'f', 3, 64))
	hdr.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(b.resetAt.UnixMilli())/1000, 'f', 3, 64))

	for i, st := range s.storms {
		if st.n > 0 && (st.channelID == "" || st.channelID == channelID) {
			st.n--
			if st.n == 0 {
				s.storms = slices.Delete(s.storms, i, i+1)
			}
			hdr.Set("X-RateLimit-Remaining", "0")
			hdr.Set("X-RateLimit-Scope", "shared")
			hdr.Set("Retry-After", strconv.Itoa(int(math.Ceil(st.retryAfter.Seconds()))))
			return hdr, st.retryAfter, true
		}
	}
	if b.count >= s.cfg.BudgetN {
		hdr.Set("X-RateLimit-Remaining", "0")
		hdr.Set("X-RateLimit-Scope", "user")
		hdr.Set("Retry-After", strconv.Itoa(int(math.Ceil(resetAfter.Seconds()))))
		return hdr, resetAfter, true
	}
	b.count++
	hdr.Set("X-RateLimit-Remaining", strconv.Itoa(s.cfg.BudgetN-b.count))
	return hdr, 0, false
}

// apply performs a request against the state; the server lock is held.
func (s *Server) apply(r *http.Request, req *request) (int, any) {
	switch req.route {
	case RouteGateway:
		if len(req.parts) == 2 && req.parts[1] == "bot" {
			return http.StatusOK, map[string]any{
				"url": s.GatewayURL(), "shards": s.cfg.Shards,
				"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": s.cfg.MaxConcurrency},
			}
		}
		return http.StatusOK, map[string]any{"url": s.GatewayURL()}
	case RouteGetChannel:
		c, ok := s.channels[req.channelID]
		if !ok {
			return http.StatusNotFound, errorBody(codeUnknownChannel, "Unknown Channel")
		}
		return http.StatusOK, channelJSON(c)
	case RouteGetMember:
		roles, ok := s.members[req.channelID][req.messageID]
		if !ok {
			return http.StatusNotFound, errorBody(codeUnknownMember, "Unknown Member")
		}
		return http.StatusOK, map[string]any{
			"user":      map[string]any{"id": req.messageID, "username": "user" + req.messageID, "discriminator": "0"},
			"roles":     append([]string{}, roles...),
			"joined_at": time.Now().UTC().Format(time.RFC3339),
		}
	case RouteStartThread:
		return s.startThread(req)
	case RouteModifyChannel:
		return s.modifyChannel(req)
	case RouteCreateMessage:
		c, ok := s.channels[req.channelID]
		if !ok {
			return http.StatusNotFound, errorBody(codeUnknownChannel, "Unknown Channel")
		}
		if c.Archived && c.Locked {
			return http.StatusBadRequest, errorBody(codeArchivedThread, "Thread is archived")
		}
		c.Archived = false // a message sent to an archived thread that is not locked reopens it
		m := &message{Message: Message{
			ID: s.newIDLocked(), ChannelID: req.channelID, GuildID: s.channels[req.channelID].GuildID,
			AuthorID: s.cfg.BotID, AuthorBot: true, CreatedAt: time.Now(),
		}}
		if status, body := s.applyFields(m, req, true); status != 0 {
			return status, body
		}
		s.storeLocked(m)
		return http.StatusOK, s.messageJSON(m)
	case RouteEditMessage:
		if _, ok := s.channels[req.channelID]; !ok {
			return http.StatusNotFound, errorBody(codeUnknownChannel, "Unknown Channel")
		}
		m, ok := s.messages[req.messageID]
		if !ok || m.deleted || m.ChannelID != req.channelID {
			return http.StatusNotFound, errorBody(codeUnknownMessage, "Unknown Message")
		}
		if c := s.channels[req.channelID]; c != nil && c.Archived {
			return http.StatusBadRequest, errorBody(codeArchivedThread, "Thread is archived")
		}
		edited := *m
		edited.Message = copyMessage(m.Message)
		if status, body := s.applyFields(&edited, req, false); status != 0 {
			return status, body
		}
		edited.Edits++
		edited.EditedAt = time.Now()
		*m = edited
		return http.StatusOK, s.messageJSON(m)
	case RouteDeleteMessage:
		m, ok := s.messages[req.messageID]
		if !ok || m.deleted || m.ChannelID != req.channelID {
			return http.StatusNotFound, errorBody(codeUnknownMessage, "Unknown Message")
		}
		m.deleted = true
		return http.StatusNoContent, nil
	case RouteTyping:
		if _, ok := s.channels[req.channelID]; !ok {
			return http.StatusNotFound, errorBody(codeUnknownChannel, "Unknown Channel")
		}
		return http.StatusNoContent, nil
	case RouteCommands:
		return s.overwriteCommands(req)
	case RouteInteractionCallback:
		return s.interactionCallback(req)
	case RouteWebhookEdit, RouteWebhookDelete, RouteWebhookFollowup:
		return s.webhook(req)
	}
	return http.StatusNotFound, errorBody(0, "404: Not Found")
}

func (s *Server) storeLocked(m *message) {
	s.messages[m.ID] = m
	s.order[m.ChannelID] = append(s.order[m.ChannelID], m.ID)
}

// applyFields applies content, components, message_reference, allowed_mentions and files of a
// create (all fields) or edit (present fields replace) to m. It returns a non-zero status on
// invalid input.
func (s *Server) applyFields(m *message, req *request, create bool) (int, any) {
	f := req.fields
	if raw, ok := f["flags"]; ok && string(raw) != "null" {
		var flags int
		_ = json.Unmarshal(raw, &flags)
		if m.Flags&FlagComponentsV2 != 0 && flags&FlagComponentsV2 == 0 {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "flags: the IS_COMPONENTS_V2 flag cannot be removed from a message")
		}
		m.Flags = flags
	}
	v2 := m.Flags&FlagComponentsV2 != 0
	if raw, ok := f["content"]; ok && string(raw) != "null" {
		var c string
		if err := json.Unmarshal(raw, &c); err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "content: "+err.Error())
		}
		if v2 && c != "" {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "content: cannot be used with the IS_COMPONENTS_V2 flag")
		}
		if !v2 {
			m.Content = c
		}
	}
	if n := utf8.RuneCountInString(m.Content); !v2 && n > maxContent {
		return http.StatusBadRequest, map[string]any{
			"code": codeInvalidFormBody, "message": "Invalid Form Body",
			"errors": map[string]any{"content": map[string]any{"_errors": []any{map[string]any{
				"code": "BASE_TYPE_MAX_LENGTH", "message": fmt.Sprintf("Must be %d or fewer in length.", maxContent),
			}}}},
		}
	}
	if raw, ok := f["components"]; ok && string(raw) != "null" {
		if v2 {
			text, buttons, err := parseV2(raw)
			if err != nil {
				return http.StatusBadRequest, errorBody(codeInvalidFormBody, "components: "+err.Error())
			}
			m.Content, m.Buttons, m.v2 = text, buttons, append(json.RawMessage(nil), raw...)
		} else {
			buttons, err := parseButtons(raw)
			if err != nil {
				return http.StatusBadRequest, errorBody(codeInvalidFormBody, "components: "+err.Error())
			}
			m.Buttons = buttons
		}
	}
	if create {
		if raw, ok := f["message_reference"]; ok && string(raw) != "null" {
			var ref struct {
				MessageID       string `json:"message_id"`
				FailIfNotExists *bool  `json:"fail_if_not_exists"`
			}
			if err := json.Unmarshal(raw, &ref); err != nil {
				return http.StatusBadRequest, errorBody(codeInvalidFormBody, "message_reference: "+err.Error())
			}
			if ref.MessageID != "" {
				if target, ok := s.messages[ref.MessageID]; (!ok || target.deleted) && ref.FailIfNotExists != nil && !*ref.FailIfNotExists {
					ref.MessageID = "" // Discord sends the message without the reference
				} else if !ok || target.deleted {
					return http.StatusBadRequest, map[string]any{"code": codeInvalidFormBody, "message": "Invalid Form Body",
						"errors": map[string]any{"message_reference": map[string]any{"_errors": []any{map[string]any{
							"code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "message": "Unknown message"}}}}}
				}
			}
			m.ReferenceID = ref.MessageID
		}
	}
	if status, body := s.applyAttachments(m, req, create); status != 0 {
		return status, body
	}
	if create && m.Content == "" && len(m.Attachments) == 0 && len(m.Buttons) == 0 {
		return http.StatusBadRequest, errorBody(codeEmptyMessage, "Cannot send an empty message")
	}
	s.computePings(m, f["allowed_mentions"])
	return 0, nil
}

// applyAttachments sets m's attachments from a request's uploads (files[n] parts) and its
// attachments field. A create carries every upload. An edit without the field keeps the
// message's attachments and adds the uploads; with it, as in API v10, the message keeps
// exactly the attachments listed: earlier ones by their id, uploads by their index n.
func (s *Server) applyAttachments(m *message, req *request, create bool) (int, any) {
	upload := func(a Attachment, name string) Attachment {
		if name != "" {
			a.Filename = name
		}
		a.ID = s.newIDLocked()
		a.URL = fmt.Sprintf("%s/attachments/%s/%s/%s", s.url, m.ChannelID, a.ID, a.Filename)
		return a
	}
	raw, listed := req.fields["attachments"]
	if create || !listed || string(raw) == "null" {
		for _, a := range req.files {
			m.Attachments = append(m.Attachments, upload(a, ""))
		}
		return 0, nil
	}
	var list []struct {
		ID       json.RawMessage `json:"id"`
		Filename string          `json:"filename"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, "attachments: "+err.Error())
	}
	var kept []Attachment
	for i, e := range list {
		var id string
		if err := json.Unmarshal(e.ID, &id); err != nil {
			id = string(e.ID) // a number
		}
		if n, err := strconv.Atoi(id); err == nil && n >= 0 && n < len(req.files) {
			kept = append(kept, upload(req.files[n], e.Filename))
			continue
		}
		if j := slices.IndexFunc(m.Attachments, func(a Attachment) bool { return a.ID == id }); j >= 0 {
			kept = append(kept, m.Attachments[j])
			continue
		}
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, fmt.Sprintf("attachments[%d]: unknown attachment id %s", i, id))
	}
	m.Attachments = kept
	return 0, nil
}

// FlagComponentsV2 is the IS_COMPONENTS_V2 message flag.
const FlagComponentsV2 = 1 << 15

// Components V2 limits: 40 components in a message, nested ones included, and 4,000
// characters of text across all of them.
const (
	maxV2Components = 40
	maxV2Text       = 4000
)

// v2Component is a Components V2 component, as much of it as the server checks.
type v2Component struct {
	Type       int           `json:"type"`
	Content    string        `json:"content"`
	CustomID   string        `json:"custom_id"`
	Label      string        `json:"label"`
	Style      int           `json:"style"`
	Components []v2Component `json:"components"`
}

// parseV2 checks the components of a Components V2 message the way Discord does (known types,
// at most 40 components, at most 4,000 characters of text) and returns what users read: the
// text displays' content joined by blank lines, and the buttons.
func parseV2(raw json.RawMessage) (string, []Button, error) {
	var top []v2Component
	if err := json.Unmarshal(raw, &top); err != nil {
		return "", nil, err
	}
	var texts []string
	buttons := []Button{}
	count, chars := 0, 0
	var walk func(cs []v2Component, depth int) error
	walk = func(cs []v2Component, depth int) error {
		for _, c := range cs {
			count++
			switch c.Type {
			case 17: // container
				if depth > 0 {
					return fmt.Errorf("a container cannot be nested")
				}
			case 10: // text display
				if c.Content == "" {
					return fmt.Errorf("text display without content")
				}
				texts = append(texts, c.Content)
				chars += utf8.RuneCountInString(c.Content)
			case 1: // action row
			case 2: // button
				if c.CustomID == "" {
					return fmt.Errorf("button %q has no custom_id", c.Label)
				}
				chars += utf8.RuneCountInString(c.Label)
				buttons = append(buttons, Button{CustomID: c.CustomID, Label: c.Label, Style: c.Style})
			default:
				return fmt.Errorf("component type %d is not supported by this server", c.Type)
			}
			if err := walk(c.Components, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top, 0); err != nil {
		return "", nil, err
	}
	if count > maxV2Components {
		return "", nil, fmt.Errorf("%d components, at most %d", count, maxV2Components)
	}
	if chars > maxV2Text {
		return "", nil, fmt.Errorf("BASE_TYPE_MAX_LENGTH: %d characters of text, at most %d", chars, maxV2Text)
	}
	return strings.Join(texts, "\n\n"), buttons, nil
}

// linkButtonStyle is a button that opens a URL.
const linkButtonStyle = 5

func parseButtons(raw json.RawMessage) ([]Button, error) {
	var rows []struct {
		Type       int `json:"type"`
		Components []struct {
			Type     int    `json:"type"`
			CustomID string `json:"custom_id"`
			Label    string `json:"label"`
			Style    int    `json:"style"`
			URL      string `json:"url"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, err
	}
	if len(rows) > 5 {
		return nil, fmt.Errorf("%d action rows, at most 5", len(rows))
	}
	buttons := []Button{}
	for _, row := range rows {
		if row.Type != 1 {
			return nil, fmt.Errorf("top-level component type %d is not an action row", row.Type)
		}
		if len(row.Components) > 5 {
			return nil, fmt.Errorf("an action row has %d components, at most 5", len(row.Components))
		}
		for _, c := range row.Components {
			if c.Type != 2 {
				continue
			}
			if c.Style == linkButtonStyle {
				// A link button has a url and no custom_id; pressing it sends no interaction.
				if c.URL == "" || c.CustomID != "" {
					return nil, fmt.Errorf("link button %q must have a url and no custom_id", c.Label)
				}
				buttons = append(buttons, Button{Label: c.Label, Style: c.Style, URL: c.URL})
				continue
			}
			if c.CustomID == "" || c.URL != "" {
				return nil, fmt.Errorf("button %q has no custom_id", c.Label)
			}
			buttons = append(buttons, Button{CustomID: c.CustomID, Label: c.Label, Style: c.Style})
		}
	}
	return buttons, nil
}

var (
	userMention = regexp.MustCompile(`<@!?(\d+)>`)
	roleMention = regexp.MustCompile(`<@&(\d+)>`)
)

// computePings decides who a message notifies under allowed_mentions, as Discord does: without
// allowed_mentions every mention in the text pings; with it, only the parse types listed and
// the ids listed, and the replied-to author only when replied_user is true.
func (s *Server) computePings(m *message, raw json.RawMessage) {
	all := len(raw) == 0 || string(raw) == "null"
	var am struct {
		Parse       []string `json:"parse"`
		Users       []string `json:"users"`
		Roles       []string `json:"roles"`
		RepliedUser bool     `json:"replied_user"`
	}
	if !all {
		_ = json.Unmarshal(raw, &am)
	}
	allow := func(kind string) bool { return all || slices.Contains(am.Parse, kind) }
	m.MentionEveryone = allow("everyone") && (strings.Contains(m.Content, "@everyone") || strings.Contains(m.Content, "@here"))
	m.MentionUsers, m.MentionRoles = nil, nil
	for _, match := range userMention.FindAllStringSubmatch(m.Content, -1) {
		if allow("users") || slices.Contains(am.Users, match[1]) {
			m.MentionUsers = append(m.MentionUsers, match[1])
		}
	}
	for _, match := range roleMention.FindAllStringSubmatch(m.Content, -1) {
		if allow("roles") || slices.Contains(am.Roles, match[1]) {
			m.MentionRoles = append(m.MentionRoles, match[1])
		}
	}
	if m.ReferenceID != "" && (all || am.RepliedUser) {
		if target, ok := s.messages[m.ReferenceID]; ok && !slices.Contains(m.MentionUsers, target.AuthorID) {
			m.MentionUsers = append(m.MentionUsers, target.AuthorID)
		}
	}
}

func channelJSON(c *Channel) map[string]any {
	out := map[string]any{"id": c.ID, "type": c.Type, "name": c.Name}
	if c.Type == ChannelPublicThread {
		out["owner_id"] = c.OwnerID
		out["thread_metadata"] = map[string]any{"archived": c.Archived, "locked": c.Locked,
			"auto_archive_duration": c.AutoArchive, "archive_timestamp": time.Now().UTC().Format(time.RFC3339)}
	}
	if c.GuildID != "" {
		out["guild_id"] = c.GuildID
	}
	if c.ParentID != "" {
		out["parent_id"] = c.ParentID
	}
	return out
}

// messageJSON renders a message as Discord's message object.
func (s *Server) messageJSON(m *message) map[string]any {
	author := map[string]any{"id": m.AuthorID, "username": "user" + m.AuthorID, "discriminator": "0"}
	if m.AuthorID == s.cfg.BotID {
		author = map[string]any{"id": s.cfg.BotID, "username": s.cfg.BotName, "discriminator": "0", "bot": true}
	}
	atts := []any{}
	for _, a := range m.Attachments {
		size := a.Size
		if size == 0 {
			size = len(a.Data)
		}
		att := map[string]any{"id": a.ID, "filename": a.Filename, "size": size, "url": a.URL,
			"proxy_url": a.URL, "content_type": a.ContentType}
		if m.Flags&FlagVoiceMessage != 0 {
			att["duration_secs"], att["waveform"] = a.DurationSecs, a.Waveform
		}
		atts = append(atts, att)
	}
	var comps any = []any{}
	if m.v2 != nil {
		comps = m.v2
	} else if len(m.Buttons) > 0 {
		var buttons []any
		for _, b := range m.Buttons {
			buttons = append(buttons, map[string]any{"type": 2, "custom_id": b.CustomID, "label": b.Label, "style": b.Style})
		}
		comps = []any{map[string]any{"type": 1, "components": buttons}}
	}
	mentions := []any{}
	for _, u := range m.MentionUsers {
		mentions = append(mentions, map[string]any{"id": u, "username": "user" + u, "discriminator": "0"})
	}
	out := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "author": author, "content": m.Content,
		"timestamp": m.CreatedAt.UTC().Format(time.RFC3339Nano), "tts": false,
		"mention_everyone": m.MentionEveryone, "mentions": mentions, "mention_roles": nonNil(m.MentionRoles),
		"attachments": atts, "embeds": []any{}, "components": comps, "pinned": false, "type": 0, "flags": m.Flags,
	}
	if !m.EditedAt.IsZero() {
		out["edited_timestamp"] = m.EditedAt.UTC().Format(time.RFC3339Nano)
	}
	if m.GuildID != "" {
		out["guild_id"] = m.GuildID
	}
	if m.ReferenceID != "" {
		out["type"] = 19
		out["message_reference"] = map[string]any{"message_id": m.ReferenceID, "channel_id": m.ChannelID, "guild_id": m.GuildID}
		if target, ok := s.messages[m.ReferenceID]; ok && !target.deleted {
			ref := s.messageJSON(target)
			delete(ref, "referenced_message")
			out["referenced_message"] = ref
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) overwriteCommands(req *request) (int, any) {
	var cmds []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Options     []CommandOption `json:"options"`
	}
	if err := json.Unmarshal(req.body, &cmds); err != nil {
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, "commands: "+err.Error())
	}
	guildID := ""
	if len(req.parts) == 5 && req.parts[2] == "guilds" {
		guildID = req.parts[3]
	}
	s.commands = nil
	out := []any{}
	for _, c := range cmds {
		if c.Name == "" || c.Description == "" {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "command name and description are required")
		}
		if len(c.Description) > 100 {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "command description must be 1-100 characters")
		}
		for i := range c.Options {
			o := &c.Options[i]
			if o.Name == "" || o.Description == "" || len(o.Description) > 100 {
				return http.StatusBadRequest, errorBody(codeInvalidFormBody, "option name and description (1-100 characters) are required")
			}
			for _, ch := range o.RawChoices {
				o.Choices = append(o.Choices, ch.Name)
			}
		}
		cmd := Command{ID: s.newIDLocked(), Name: c.Name, Description: c.Description, GuildID: guildID, Options: c.Options}
		s.commands = append(s.commands, cmd)
		out = append(out, map[string]any{"id": cmd.ID, "application_id": s.cfg.ApplicationID, "name": c.Name,
			"description": c.Description, "type": 1, "version": cmd.ID})
	}
	return http.StatusOK, out
}

// Interaction callback types (Discord's numbering).
const (
	callbackMessage        = 4
	callbackDeferred       = 5
	callbackDeferredUpdate = 6
	callbackUpdate         = 7
)

// flagLoading marks a deferred response ("bot is thinking...").
const flagLoading = 1 << 7

func (s *Server) interactionCallback(req *request) (int, any) {
	it, ok := s.interactions[req.parts[2]]
	if !ok || it.id != req.parts[1] {
		return http.StatusNotFound, errorBody(codeUnknownInteraction, "Unknown interaction")
	}
	if it.responded {
		return http.StatusBadRequest, errorBody(codeAlreadyAcked, "Interaction has already been acknowledged.")
	}
	if d := s.interactionDeadline(); d > 0 && time.Since(it.created) > d {
		return http.StatusNotFound, errorBody(codeUnknownInteraction, "Unknown interaction")
	}
	var cb struct {
		Type int             `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(req.body, &cb); err != nil {
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, "callback: "+err.Error())
	}
	inner := &request{route: req.route, body: cb.Data, files: req.files}
	if len(cb.Data) > 0 && string(cb.Data) != "null" {
		if err := json.Unmarshal(cb.Data, &inner.fields); err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "callback data: "+err.Error())
		}
	}
	if (cb.Type == callbackDeferredUpdate || cb.Type == callbackUpdate) && it.messageID == "" {
		// Updating "the message the component is on" has no message without a component.
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, fmt.Sprintf("interaction callback type %d is only valid for component interactions", cb.Type))
	}
	switch cb.Type {
	case callbackMessage, callbackDeferred:
		m := &message{Message: Message{ID: s.newIDLocked(), ChannelID: it.channelID, GuildID: it.guildID,
			AuthorID: s.cfg.BotID, AuthorBot: true, CreatedAt: time.Now(), InteractionID: it.id}}
		if cb.Type == callbackDeferred {
			m.Flags = flagLoading
		} else if status, body := s.applyFields(m, inner, true); status != 0 {
			return status, body
		}
		s.storeLocked(m)
		it.originalID = m.ID
	case callbackDeferredUpdate:
	case callbackUpdate:
		m, ok := s.messages[it.messageID]
		if !ok || m.deleted {
			return http.StatusNotFound, errorBody(codeUnknownMessage, "Unknown Message")
		}
		if status, body := s.applyFields(m, inner, false); status != 0 {
			return status, body
		}
		m.Edits++
		m.EditedAt = time.Now()
	default:
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, fmt.Sprintf("unsupported callback type %d", cb.Type))
	}
	it.responded = true
	return http.StatusNoContent, nil
}

// interactionDeadline is how long an interaction's callback is taken (Config.InteractionDeadline).
func (s *Server) interactionDeadline() time.Duration {
	if s.cfg.InteractionDeadline == 0 {
		return 3 * time.Second
	}
	return s.cfg.InteractionDeadline
}

func (s *Server) webhook(req *request) (int, any) {
	it, ok := s.interactions[req.parts[2]]
	if !ok || req.parts[1] != s.cfg.ApplicationID || !it.responded {
		return http.StatusNotFound, errorBody(10015, "Unknown Webhook")
	}
	switch req.route {
	case RouteWebhookFollowup:
		m := &message{Message: Message{ID: s.newIDLocked(), ChannelID: it.channelID, GuildID: it.guildID,
			AuthorID: s.cfg.BotID, AuthorBot: true, CreatedAt: time.Now(), InteractionID: it.id}}
		if status, body := s.applyFields(m, req, true); status != 0 {
			return status, body
		}
		s.storeLocked(m)
		return http.StatusOK, s.messageJSON(m)
	}
	id := req.messageID
	if id == "@original" {
		id = it.originalID
	}
	m, ok := s.messages[id]
	if !ok || m.deleted {
		return http.StatusNotFound, errorBody(codeUnknownMessage, "Unknown Message")
	}
	if req.route == RouteWebhookDelete {
		m.deleted = true
		return http.StatusNoContent, nil
	}
	if status, body := s.applyFields(m, req, false); status != 0 {
		return status, body
	}
	m.Flags &^= flagLoading
	m.Edits++
	m.EditedAt = time.Now()
	return http.StatusOK, s.messageJSON(m)
}

func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/attachments/"), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(parts) == 3 {
		for _, id := range s.order[parts[0]] {
			for _, a := range s.messages[id].Attachments {
				if a.ID == parts[1] {
					w.Header().Set("Content-Type", a.ContentType)
					w.Header().Set("Content-Length", strconv.Itoa(len(a.Data)))
					_, _ = w.Write(a.Data)
					return
				}
			}
		}
	}
	http.NotFound(w, r)
}

// maxThreadName is the longest thread name Discord takes, in characters.
const maxThreadName = 100

// archiveDurations are the auto_archive_duration values Discord takes, in minutes.
var archiveDurations = []int{60, 1440, 4320, 10080}

// threadName checks a thread name as Discord does: 1 to 100 characters.
func threadName(raw json.RawMessage) (string, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	if n := utf8.RuneCountInString(name); n < 1 || n > maxThreadName {
		return "", fmt.Errorf("name: BASE_TYPE_BAD_LENGTH: must be between 1 and %d in length, got %d", maxThreadName, n)
	}
	return name, nil
}

// archiveDuration checks an auto_archive_duration as Discord does: one of 60, 1440, 4320, 10080.
func archiveDuration(raw json.RawMessage) (int, error) {
	var d int
	if err := json.Unmarshal(raw, &d); err != nil || !slices.Contains(archiveDurations, d) {
		return 0, fmt.Errorf("auto_archive_duration: BASE_TYPE_CHOICES: value must be one of %v", archiveDurations)
	}
	return d, nil
}

// startThread is Start Thread from Message: a public thread whose id is the message's, so one
// message has at most one thread (a second is refused with 160004), opened in a guild text
// channel on one of its messages, named 1-100 characters, archived after one of Discord's
// durations.
func (s *Server) startThread(req *request) (int, any) {
	parent, ok := s.channels[req.channelID]
	if !ok {
		return http.StatusNotFound, errorBody(codeUnknownChannel, "Unknown Channel")
	}
	m, ok := s.messages[req.messageID]
	if !ok || m.deleted || m.ChannelID != req.channelID {
		return http.StatusNotFound, errorBody(codeUnknownMessage, "Unknown Message")
	}
	if parent.Type != ChannelGuildText {
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Cannot execute action on this channel type")
	}
	if _, exists := s.channels[req.messageID]; exists {
		return http.StatusBadRequest, errorBody(codeThreadExists, "A thread has already been created for this message")
	}
	name, err := threadName(req.fields["name"])
	if err != nil {
		return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Invalid Form Body: "+err.Error())
	}
	archive := 4320
	if raw, ok := req.fields["auto_archive_duration"]; ok && string(raw) != "null" {
		if archive, err = archiveDuration(raw); err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Invalid Form Body: "+err.Error())
		}
	}
	c := &Channel{ID: req.messageID, GuildID: parent.GuildID, ParentID: parent.ID, Type: ChannelPublicThread,
		Name: name, OwnerID: s.cfg.BotID, AutoArchive: archive}
	s.channels[c.ID] = c
	return http.StatusCreated, channelJSON(c)
}

// modifyChannel is Modify Channel for a thread: its name (1-100 characters), archived,
// locked and auto_archive_duration. An archived thread takes only a request that reopens it
// (50083 otherwise); reopening a locked one needs MANAGE_THREADS (Config.ManageThreads).
func (s *Server) modifyChannel(req *request) (int, any) {
	c, ok := s.channels[req.channelID]
	if !ok {
		return http.StatusNotFound, errorBody(codeUnknownChannel, "Unknown Channel")
	}
	if c.Type != ChannelPublicThread {
		return http.StatusForbidden, errorBody(codeMissingPermissions, "Missing Permissions")
	}
	next := *c
	if raw, ok := req.fields["archived"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &next.Archived); err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Invalid Form Body: archived: "+err.Error())
		}
	}
	if c.Archived && next.Archived {
		return http.StatusBadRequest, errorBody(codeArchivedThread, "Thread is archived")
	}
	if c.Archived && c.Locked && !s.cfg.ManageThreads {
		return http.StatusForbidden, errorBody(codeMissingPermissions, "Missing Permissions")
	}
	if raw, ok := req.fields["locked"]; ok && string(raw) != "null" {
		if !s.cfg.ManageThreads {
			return http.StatusForbidden, errorBody(codeMissingPermissions, "Missing Permissions")
		}
		if err := json.Unmarshal(raw, &next.Locked); err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Invalid Form Body: locked: "+err.Error())
		}
	}
	if raw, ok := req.fields["name"]; ok && string(raw) != "null" {
		name, err := threadName(raw)
		if err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Invalid Form Body: "+err.Error())
		}
		next.Name = name
	}
	if raw, ok := req.fields["auto_archive_duration"]; ok && string(raw) != "null" {
		d, err := archiveDuration(raw)
		if err != nil {
			return http.StatusBadRequest, errorBody(codeInvalidFormBody, "Invalid Form Body: "+err.Error())
		}
		next.AutoArchive = d
	}
	*c = next
	return http.StatusOK, channelJSON(c)
}
