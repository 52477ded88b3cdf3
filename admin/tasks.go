package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"relaybot/store"
)

// Tasks reads and cancels the scheduled tasks (*store.TaskQuery).
type Tasks interface {
	ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error)
	TaskRuns(ctx context.Context, task int64, limit int) ([]store.TaskRun, error)
	CancelTask(ctx context.Context, id int64) (bool, error)
}

// TaskItem is a scheduled task as GET /api/v1/tasks and bot tasks -json give it. NextRunAt and
// LastRunAt are RFC 3339 in UTC, null when there is none.
type TaskItem struct {
	ID         int64   `json:"id"`
	Platform   string  `json:"platform"`
	ChatID     string  `json:"chat_id"`
	UserID     string  `json:"user_id"`
	Kind       string  `json:"kind"`
	Text       string  `json:"text"`
	Schedule   string  `json:"schedule"`
	Timezone   string  `json:"timezone"`
	NextRunAt  *string `json:"next_run_at"`
	LastRunAt  *string `json:"last_run_at"`
	LastStatus string  `json:"last_status"`
	Runs       int     `json:"runs"`
}

// TaskItemOf is t's wire form.
func TaskItemOf(t store.Task) TaskItem {
	return TaskItem{ID: t.ID, Platform: t.Platform, ChatID: t.ChatID, UserID: t.UserID, Kind: t.Kind, Text: t.Text,
		Schedule: t.Schedule, Timezone: t.Timezone, NextRunAt: rfc3339(t.NextRunAt), LastRunAt: rfc3339(t.LastRunAt),
		LastStatus: t.LastStatus, Runs: t.Runs}
}

func rfc3339(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// apiTasks lists the scheduled tasks, newest first (GET /api/v1/tasks); none when they are off.
func (s *Server) apiTasks(w http.ResponseWriter, r *http.Request) {
	items := []TaskItem{}
	if s.opts.Store.Tasks != nil {
		list, err := s.opts.Store.Tasks.ListTasks(r.Context(), store.TaskFilter{})
		if err != nil {
			s.log.Error("admin: list tasks", "err", err)
			writeJSONError(w, http.StatusInternalServerError, "the tasks could not be listed; see the bot's log")
			return
		}
		for _, t := range list {
			items = append(items, TaskItemOf(t))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// errNoTask is the cancel of a task that does not exist or has no runs to come.
var errNoTask = errors.New("no such task with runs to come")

// cancelTask cancels the task the path names.
func (s *Server) cancelTask(r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || s.opts.Store.Tasks == nil {
		return errNoTask
	}
	ok, err := s.opts.Store.Tasks.CancelTask(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return errNoTask
	}
	s.log.Info("admin: task cancelled", "task", id)
	return nil
}

// apiCancelTask cancels one (DELETE /api/v1/tasks/{id}): 204, or 404 when there is no such task
// with runs to come.
func (s *Server) apiCancelTask(w http.ResponseWriter, r *http.Request) {
	switch err := s.cancelTask(r); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, errNoTask):
		writeJSONError(w, http.StatusNotFound, "no such task with runs to come")
	default:
		s.log.Error("admin: cancel task", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "the task could not be cancelled; see the bot's log")
	}
}

// taskRow is one task on the Tasks page with its latest runs.
type taskRow struct {
	store.Task
	Runs []store.TaskRun
}

// Next is the task's next run; zero when there is none.
func (r taskRow) Next() time.Time {
	if r.NextRunAt == nil {
		return time.Time{}
	}
	return *r.NextRunAt
}

type tasksData struct {
	pageData
	Tasks []taskRow
	Off   bool
}

// tasksRuns is how many of each task's runs the page shows.
const tasksRuns = 5

// tasksPage lists the scheduled tasks with their next runs and their latest runs' outcomes,
// each run's turn linked to its timeline (GET /admin/tasks).
func (s *Server) tasksPage(w http.ResponseWriter, r *http.Request) {
	data := tasksData{pageData: s.page(r, "Tasks"), Off: s.opts.Store.Tasks == nil}
	data.Nav = "tasks"
	if data.Off {
		s.render(w, r, http.StatusOK, "tasks", data)
		return
	}
	list, err := s.opts.Store.Tasks.ListTasks(r.Context(), store.TaskFilter{Limit: 200})
	if err == nil {
		for _, t := range list {
			var runs []store.TaskRun
			if runs, err = s.opts.Store.Tasks.TaskRuns(r.Context(), t.ID, tasksRuns); err != nil {
				break
			}
			data.Tasks = append(data.Tasks, taskRow{Task: t, Runs: runs})
		}
	}
	if err != nil {
		s.log.Error("admin: list tasks", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The tasks could not be listed; see the bot's log.")
		return
	}
	s.render(w, r, http.StatusOK, "tasks", data)
}

// taskCancelPage cancels one from the page's form (POST /admin/tasks/{id}/cancel), which
// carries the session's CSRF token, and goes back to the list.
func (s *Server) taskCancelPage(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad cancel form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ss := sessionOf(r); s.opts.Token != "" && (ss.csrf == "" || !equalSecret(r.PostForm.Get("csrf"), ss.csrf)) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	switch err := s.cancelTask(r); {
	case err == nil, errors.Is(err, errNoTask):
		http.Redirect(w, r, "/admin/tasks", http.StatusSeeOther)
	default:
		s.log.Error("admin: cancel task", "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "The task could not be cancelled; see the bot's log.")
	}
}
