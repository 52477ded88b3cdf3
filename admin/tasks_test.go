package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"relaybot/store"
	"relaybot/store/storetest"
)

// The Tasks page lists the scheduled tasks with their next runs and their latest runs'
// outcomes, a run's turn linked to its timeline; its Cancel button (with the session's CSRF
// token) and DELETE /api/v1/tasks/{id} cancel one; GET /api/v1/tasks gives the contract's
// fields, null where a task has no run to come.
func TestTasksAreListedWithTheirRunsAndCancelled(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	mk := func(user, text string) store.Task {
		task, err := st.Tasks.CreateTask(ctx, store.Task{Platform: "telegram", ChatID: "-100", ThreadID: "7", UserID: user, Kind: "prompt",
			Text: text, Schedule: "cron 0 9 * * 1-5", Timezone: "Europe/Berlin", State: store.TaskActive, NextRunAt: &at}, 10)
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	standup, other := mk("600", "post the standup prompt"), mk("601", "check the build")
	c := store.Claimant{Instance: "test"}
	next := at.Add(24 * time.Hour)
	run, err := st.Tasks.ClaimTaskRun(ctx, standup.ID, 0, at, &next, store.RunClaimed, c)
	if err != nil || run == 0 {
		t.Fatal(run, err)
	}
	if _, _, err := st.Tasks.EndTaskRun(ctx, run, c, store.RunEnd{Status: store.RunDelivered, TurnID: 4242}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Store.Tasks = st.Tasks })
	cl, csrf := loggedIn(t, ts)

	code, body := get(t, cl, ts.URL+"/admin/tasks")
	for _, want := range []string{"post the standup prompt", "telegram:-100#7", "cron 0 9 * * 1-5", "Europe/Berlin", "2030-01-03 09:00:00",
		`href="/admin/turns/4242"`, "delivered"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("tasks page (%d) lacks %q:\n%s", code, want, body)
		}
	}
	resp, err := cl.PostForm(ts.URL+"/admin/tasks/"+itoa(other.ID)+"/cancel", url.Values{"csrf": {"forged"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, _ := st.Tasks.Task(ctx, other.ID); got.State != store.TaskActive {
		t.Fatal("a forged CSRF token cancelled a task")
	}
	resp, _ = cl.PostForm(ts.URL+"/admin/tasks/"+itoa(other.ID)+"/cancel", url.Values{"csrf": {csrf}})
	resp.Body.Close()
	if got, _ := st.Tasks.Task(ctx, other.ID); got.State != store.TaskCancelled {
		t.Fatalf("after the Cancel button the task is %s", got.State)
	}

	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || len(got.Items) != 2 {
		t.Fatalf("GET /api/v1/tasks: %s (%v)", raw, err)
	}
	first := got.Items[1] // newest first: the standup task is the older
	want := map[string]any{"id": float64(standup.ID), "platform": "telegram", "chat_id": "-100", "user_id": "600", "kind": "prompt",
		"text": "post the standup prompt", "schedule": "cron 0 9 * * 1-5", "timezone": "Europe/Berlin",
		"next_run_at": "2030-01-03T09:00:00Z", "last_run_at": "2030-01-02T09:00:00Z", "last_status": "delivered", "runs": float64(1)}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("item %s = %v, want %v (%s)", k, first[k], v, raw)
		}
	}
	if len(first) != len(want) {
		t.Errorf("item has %d fields, want the contract's %d: %s", len(first), len(want), raw)
	}
	if v, ok := got.Items[0]["next_run_at"]; !ok || v != nil {
		t.Errorf("a cancelled task's next_run_at = %v, want null", v)
	}
	del := func() int {
		req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/v1/tasks/"+itoa(standup.ID), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del(); code != http.StatusNoContent {
		t.Errorf("DELETE: %d, want 204", code)
	}
	if code := del(); code != http.StatusNotFound {
		t.Errorf("DELETE again: %d, want 404", code)
	}
}
