package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Defaults of the listener's timeouts and size caps (Options leaves them zero).
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 30 * time.Second
	defaultWriteTimeout      = 2 * time.Minute
	defaultIdleTimeout       = time.Minute
	defaultMaxHeaderBytes    = 64 << 10
	defaultMaxBodyBytes      = 1 << 20
)

// withDefaults fills the zero timeouts and caps of o.
func (o *Options) withDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.ReadHeaderTimeout, defaultReadHeaderTimeout)
	def(&o.ReadTimeout, defaultReadTimeout)
	def(&o.WriteTimeout, defaultWriteTimeout)
	def(&o.IdleTimeout, defaultIdleTimeout)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = defaultMaxBodyBytes
	}
}

// limits caps request bodies and adjusts the connection's deadlines to the request:
//   - a body longer than MaxBodyBytes is refused (413) before it is read (a knowledge upload's
//     refusal names knowledge.max_file_bytes, in JSON on the API);
//   - a request without a body has been read whole once its headers are in, so its handler is
//     not held to ReadTimeout (the server's read of the idle connection beneath would otherwise
//     cancel a long export or profile when ReadTimeout ends);
//   - a response that streams for as long as the client stays (the web chat's event stream,
//     exports) is held to WriteTimeout per write instead of as a whole: a reader that stalls is
//     still cut, a live one is not.
func (s *Server) limits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.opts.MaxBodyBytes
		if r.Method == http.MethodPost && r.URL.Path == "/chat/send" && s.opts.ChatUploadBytes > limit {
			limit = s.opts.ChatUploadBytes
		}
		recall := s.recall(r.Context())
		if s.opts.Recall != nil {
			// One request sees one of the bot's configurations, even across a reload.
			r = r.WithContext(context.WithValue(r.Context(), recallKey{}, recall))
		}
		if knowledgeUpload(r) && recall.KnowledgeUploadBytes > limit {
			limit = recall.KnowledgeUploadBytes
		}
		if knowledgeUpload(r) && r.ContentLength > limit && s.knowledgeTooLarge(w, r) {
			return
		}
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("request body too large (at most %.1f MB)", float64(limit)/(1<<20)), http.StatusRequestEntityTooLarge)
			return
		}
		rc := http.NewResponseController(w)
		if r.Body == nil || r.Body == http.NoBody {
			_ = rc.SetReadDeadline(time.Time{})
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if streams(r) {
			_ = rc.SetWriteDeadline(time.Time{})
			w = &perWriteDeadline{ResponseWriter: w, rc: rc, timeout: s.opts.WriteTimeout}
		}
		next.ServeHTTP(w, r)
	})
}

// streams reports whether r asks for a response that may last as long as the client stays.
func streams(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream") ||
		strings.HasPrefix(r.URL.Path, "/admin/export.")
}

// perWriteDeadline gives each write (and flush) WriteTimeout to reach the client.
type perWriteDeadline struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *perWriteDeadline) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

// Write extends the deadline, then writes.
func (w *perWriteDeadline) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// FlushError extends the deadline, then flushes (for http.ResponseController).
func (w *perWriteDeadline) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Flush is FlushError for http.Flusher users.
func (w *perWriteDeadline) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection's own writer.
func (w *perWriteDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }
