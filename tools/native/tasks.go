package native

import (
	"context"
	"encoding/json"
	"fmt"

	"relaybot/tools"
)

func isTaskTool(name string) bool {
	return name == ScheduleTask || name == ListTasks || name == CancelTask
}

var scheduleTaskSpec = tools.Spec{
	Name: ScheduleTask,
	Description: "Schedule a reminder or a task in this chat, for the user who asks. Give exactly one of message " +
		"(sent as written, no model call) or prompt (run as a new message from the user at that time), and exactly one " +
		"of in, at, cron or every. Never compute times yourself: pass what the user said as in or at. The result names " +
		"the task's number and its next run in the user's time zone.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"message":{"type":"string","description":"Text to send as written when the task fires."},` +
		`"prompt":{"type":"string","description":"A request to answer when the task fires, as if the user sent it then."},` +
		`"in":{"type":"string","description":"Relative time from now: 90s, 15m, 2h, 1d."},` +
		`"at":{"type":"string","description":"Local time \"2006-01-02 15:04\" in tz (else the user's zone), or RFC 3339."},` +
		`"cron":{"type":"string","description":"5-field cron expression (minute hour day-of-month month day-of-week) in tz or the user's zone."},` +
		`"every":{"type":"string","description":"Recurrence such as 30m, 2h or 1d, first run one period from now."},` +
		`"tz":{"type":"string","description":"IANA time zone such as Europe/Berlin; default the user's zone."}},` +
		`"additionalProperties":false}`),
}

var listTasksSpec = tools.Spec{
	Name:        ListTasks,
	Description: "List the user's scheduled tasks in this chat: number, next run in their zone, what it does.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	ReadOnly:    true,
}

var cancelTaskSpec = tools.Spec{
	Name:        CancelTask,
	Description: "Cancel one of the user's scheduled tasks in this chat by its number (list_tasks shows them).",
	Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer","description":"The task's number."}},` +
		`"required":["id"],"additionalProperties":false}`),
}

// task answers the scheduled-task tools through Options.Tasks.
func (l *Loader) task(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	var (
		text string
		err  error
	)
	switch inv.Name {
	case ScheduleTask:
		text, err = l.opts.Tasks.ScheduleTask(ctx, inv.Turn, inv.Arguments)
	case ListTasks:
		text, err = l.opts.Tasks.ListTasks(ctx, inv.Turn)
	default:
		var a struct {
			ID *int64 `json:"id"`
		}
		if jerr := json.Unmarshal(inv.Arguments, &a); jerr != nil || a.ID == nil {
			return tools.Result{}, fmt.Errorf("id: give the task's number (list_tasks shows them)")
		}
		text, err = l.opts.Tasks.CancelTask(ctx, inv.Turn, *a.ID)
	}
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: text}, nil
}
