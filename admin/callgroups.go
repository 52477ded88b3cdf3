package admin

import (
	"context"
	"fmt"
	"maps"
	"net/url"

	"relaybot/audit"
)

// groupByTurn is the calls list's group= value that groups a page's calls by their turn.
const groupByTurn = "turn"

// checkGroup refuses a group= value other than "turn".
func checkGroup(v string) error {
	if v != "" && v != groupByTurn {
		return fmt.Errorf("group %q must be %q or empty", v, groupByTurn)
	}
	return nil
}

// callGroup is the calls of one turn on a page of the calls list (TurnID 0: calls of no turn).
type callGroup struct {
	TurnID int64
	Calls  []audit.Record
	Failed int
}

// groupByTurns groups calls by turn, each group where its first call is on the page.
func groupByTurns(calls []audit.Record) []callGroup {
	var out []callGroup
	at := map[int64]int{}
	for _, c := range calls {
		i, ok := at[c.TurnID]
		if !ok {
			i = len(out)
			at[c.TurnID] = i
			out = append(out, callGroup{TurnID: c.TurnID})
		}
		out[i].Calls = append(out[i].Calls, c)
		if c.Status.Failed() {
			out[i].Failed++
		}
	}
	return out
}

// countCalls counts the calls f keeps and, when f keeps every status, those that failed
// (failed is -1 otherwise).
func (s *Server) countCalls(ctx context.Context, f audit.Filter) (total, failed int, err error) {
	f.Cursor, f.After = "", ""
	if total, err = s.opts.Store.ToolCalls.CountToolCalls(ctx, f); err != nil || len(f.Statuses) > 0 {
		return total, -1, err
	}
	f.Statuses = failedStatuses()
	failed, err = s.opts.Store.ToolCalls.CountToolCalls(ctx, f)
	return total, failed, err
}

// callRow is one row of the calls list, with the page it is on (for its chat and trace links).
type callRow struct {
	Page callsData
	Call audit.Record
}

// callsLinks are the calls list's links beside its total: the failed calls of the same filter,
// and this page grouped by turn and not (q is the request's query, its page cursor included).
func (s *Server) callsLinks(form filterForm, q url.Values) (failed, group, ungroup string) {
	f := form.query()
	f.Del("group")
	f.Set("status", statusFailed)
	page := form.query()
	for _, k := range []string{"cursor", "after"} {
		if v := q.Get(k); v != "" {
			page.Set(k, v)
		}
	}
	grouped := maps.Clone(page)
	grouped.Set("group", groupByTurn)
	page.Del("group")
	return withQuery("/admin/calls", f), withQuery("/admin/calls", grouped), withQuery("/admin/calls", page)
}
