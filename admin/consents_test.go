package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/store/storetest"
)

// The Consents page lists the "always allow" answers in force with who gave them (name and
// platform id) and whom they cover; its Revoke button, with the session's CSRF token, ends one
// (a forged token does not); the JSON API lists and revokes them too.
func TestConsentsAreListedAndRevoked(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	now := time.Now()
	mine, err := st.Consents.SaveConsent(ctx, audit.Consent{Platform: "discord", ChatID: "55", UserID: "600", Tool: "send_mail",
		Server: "mail", Rule: "tools.policy[0] (tool send_mail)", GivenBy: "Ann", GivenByID: "600", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Consents.SaveConsent(ctx, audit.Consent{Platform: "telegram", ChatID: "-100", Tool: "deploy", Rule: "tools.policy[1]",
		GivenBy: "Chief", GivenByID: "9", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken)
	c, csrf := loggedIn(t, ts)

	code, body := get(t, c, ts.URL+"/admin/consents")
	if code != http.StatusOK || !strings.Contains(body, "send_mail") || !strings.Contains(body, "everyone in the chat") ||
		!strings.Contains(body, "Chief") || !strings.Contains(body, "<code>9</code>") {
		t.Fatalf("consents page: %d\n%s", code, body)
	}
	post := func(id int64, token string) {
		t.Helper()
		resp, err := c.PostForm(ts.URL+"/admin/consents/"+itoa(id)+"/revoke", url.Values{"csrf": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post(all, "forged")
	if list, _ := st.Consents.ListConsents(ctx, audit.ConsentFilter{}); len(list) != 2 {
		t.Fatalf("a forged CSRF token revoked a consent: %d left", len(list))
	}
	post(all, csrf)
	if list, _ := st.Consents.ListConsents(ctx, audit.ConsentFilter{}); len(list) != 1 || list[0].ID != mine {
		t.Fatalf("after the revoke button: %+v", list)
	}

	var got struct {
		Items []consentJSON `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/consents", testToken, &got); code != http.StatusOK || len(got.Items) != 1 ||
		got.Items[0].UserID != "600" || got.Items[0].Everyone || got.Items[0].GivenByID != "600" {
		t.Fatalf("GET /api/v1/consents: %d %+v", code, got)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/api/v1/consents/"+itoa(mine), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	resp, err = ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("DELETE again: %d, want 404", resp.StatusCode)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// An approved call's audit row names the approver by display name and platform id in the API
// (approver, approver_id): a display name alone can be made to look like anyone's.
func TestAPIToolCallNamesTheApproversID(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	rec := audit.Record{Platform: "discord", ChatID: "55", UserID: "600", ToolName: "send_mail", Status: audit.StatusRunning,
		StartedAt: time.Now().UTC(), ApprovalRequired: true}
	if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Status, rec.Decision, rec.Approver, rec.ApproverID, rec.DecidedAt = audit.StatusOK, audit.DecisionApproved, "Admin", "700", time.Now().UTC()
	if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken)
	var got struct {
		Items []map[string]any `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/tool-calls", testToken, &got); code != http.StatusOK || len(got.Items) != 1 ||
		got.Items[0]["approver"] != "Admin" || got.Items[0]["approver_id"] != "700" {
		t.Fatalf("GET /api/v1/tool-calls: %d %+v", code, got.Items)
	}
}
