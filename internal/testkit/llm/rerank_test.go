package llm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestRerankRefusesWhatTheAPIRefusesAndOrdersByRelevance(t *testing.T) {
	s := NewServer()
	defer s.Close()
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(s.URL+"/rerank", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, bad := range []string{
		`{"query":"q","documents":["a"]}`,
		`{"model":"m","documents":["a"]}`,
		`{"model":"m","query":" ","documents":["a"]}`,
		`{"model":"m","query":"q","documents":[]}`,
		`{"model":"m","query":"q","documents":[1]}`,
		`{"model":"m","query":"q","documents":["a"],"top_n":0}`,
		`{"model":"m","query":"q","documents":[` + strings.Repeat(`"a",`, maxRerankDocuments) + `"a"]}`,
	} {
		if code, _ := post(bad); code != http.StatusBadRequest {
			t.Errorf("%.60s…: %d, want 400", bad, code)
		}
	}
	code, out := post(`{"model":"m","query":"parental leave weeks","documents":["Expenses are filed monthly.",{"text":"Parental leave is sixteen weeks."},"Leave the parental forms here."],"top_n":2}`)
	results, _ := out["results"].([]any)
	if code != http.StatusOK || len(results) != 2 || results[0].(map[string]any)["index"].(float64) != 1 {
		t.Fatalf("rerank: %d %v, want the parental leave document first, two results", code, out)
	}
	if got := s.RerankRequests(); len(got) != 1 || got[0].Documents[1] != "Parental leave is sixteen weeks." || got[0].TopN != 2 {
		t.Fatalf("recorded %+v", got)
	}
	s.FailRerank(1, http.StatusServiceUnavailable)
	if code, _ := post(`{"model":"m","query":"q","documents":["a"]}`); code != http.StatusServiceUnavailable {
		t.Fatalf("a failed rerank answered %d", code)
	}
}
