package admin

import (
	"net/http"
	"net/url"
	"time"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

type loginData struct {
	pageData
	Next  string
	Error string
}

// loginPage shows the login form; without a token there is nothing to log in to.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if _, ok, _, _ := s.authorized(r); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", loginData{pageData: s.page(r, "Log in"), Next: next})
}

// login checks the token and starts a session.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad login form: "+err.Error(), http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if s.opts.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	data := loginData{pageData: s.page(r, "Log in"), Next: next}
	ok, wait := s.checkToken(r, r.PostForm.Get("token"))
	if wait > 0 {
		w.Header().Set("Retry-After", retryAfter(wait))
		data.Error = "Too many wrong tokens from your address. Try again in " + retryAfter(wait) + " s."
		s.render(w, r, http.StatusTooManyRequests, "login", data)
		return
	}
	if !ok {
		data.Error = "That token is not the admin token."
		s.render(w, r, http.StatusUnauthorized, "login", data)
		return
	}
	id, err := s.startSession(r.Context())
	if err != nil {
		s.log.Error("admin: log in", "err", err)
		data.Error = "The login could not be stored (see the bot's log). Try again in a moment."
		s.render(w, r, http.StatusServiceUnavailable, "login", data)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Value:    id,
		Path:     "/",
		MaxAge:   int(sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   s.proxies.Secure(r),
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session; the form carries the session's CSRF token.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad logout form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.opts.Token == "" {
		http.Redirect(w, r, "/admin/", http.StatusSeeOther)
		return
	}
	ss := sessionOf(r)
	if ss.csrf == "" || !equalSecret(r.PostForm.Get("csrf"), ss.csrf) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if err := s.sessions.EndAdminSession(r.Context(), hashCookie(ck.Value)); err != nil {
			s.log.Error("admin: log out", "err", err)
			http.Error(w, "the logout could not be stored (see the bot's log): try again in a moment", http.StatusServiceUnavailable)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.proxies.Secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
}
