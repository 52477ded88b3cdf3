package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/store"
	"relaybot/store/storetest"
)

// benchStore returns a migrated SQLite store holding n audit rows over a few tools and chats.
func benchStore(b *testing.B, n int) *store.Database {
	b.Helper()
	ctx := context.Background()
	st := storetest.Open(b, storetest.SQLite)
	base := time.Now().Add(-time.Duration(n) * time.Second)
	statuses := []audit.Status{audit.StatusOK, audit.StatusOK, audit.StatusOK, audit.StatusError}
	for i := range n {
		rec := audit.Record{TurnID: int64(i/4 + 1), Platform: "telegram", ChatID: fmt.Sprint(i % 50),
			UserID: fmt.Sprint(i % 20), ToolName: fmt.Sprintf("tool_%d", i%8), Source: "native",
			ToolCallID: fmt.Sprint(i), Arguments: `{"q":"benchmark"}`, StartedAt: base.Add(time.Duration(i) * time.Second)}
		if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			b.Fatal(err)
		}
		rec.Status, rec.Duration = statuses[i%4], time.Duration(i%1000)*time.Millisecond
		if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

func benchServer(b *testing.B, st *store.Database) *httptest.Server {
	srv, err := New(Options{Listen: "127.0.0.1:0", Token: testToken, Store: storeOf(st)})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	return ts
}

func benchGet(b *testing.B, ts *httptest.Server, path string) {
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := ts.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d", path, resp.StatusCode)
	}
}

// BenchmarkAPIToolCalls measures one filtered page of 50 rows from 5000 over HTTP.
func BenchmarkAPIToolCalls(b *testing.B) {
	ts := benchServer(b, benchStore(b, 5000))
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, ts, "/api/v1/tool-calls?status=error&limit=50")
	}
}

// BenchmarkExportCSV measures a CSV export of 5000 rows (ten store pages), streamed.
func BenchmarkExportCSV(b *testing.B) {
	ts := benchServer(b, benchStore(b, 5000))
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, ts, "/admin/export.csv")
	}
}

// BenchmarkCallsPage measures the calls page of a filter matching 1250 of 5000 rows: one page of
// 50, the total and the chats of the page's conversations.
func BenchmarkCallsPage(b *testing.B) {
	ts := benchServer(b, benchStore(b, 5000))
	b.ResetTimer()
	for b.Loop() {
		benchGet(b, ts, "/admin/?status=error")
	}
}
