package mcp

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// The Kit's task tool (MCP Tasks, 2025-11-25), served by mcp-go as the spec has it: the server
// declares tasks (list, cancel, task-augmented tools/call); a tool call with a "task" parameter
// is answered at once with the task, tasks/get tells its status, tasks/result waits for and
// returns its result, tasks/cancel stops it; the tool called without a task is refused
// ("requires task augmentation").
//
//   - research(steps, seconds): requires a task; reports steps progress notifications ("step N
//     of M") to the call's progress token, then waits seconds (cancellable, counted in
//     Cancelled), then returns "researched".

// taskWork gives a task's handler the context its work runs in: mcp-go v1.2.1 runs a task in
// the context of the request that created it, which ends when that request is answered, so the
// work is detached from it and ended by tasks/cancel instead (cancelTasks), as the spec means.
func (k *Kit) taskWork(ctx context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.mu.Lock()
	k.nextTask++
	id := k.nextTask
	if k.tasks == nil {
		k.tasks = map[int]context.CancelFunc{}
	}
	k.tasks[id] = cancel
	k.mu.Unlock()
	return wctx, func() {
		k.mu.Lock()
		delete(k.tasks, id)
		k.mu.Unlock()
		cancel()
	}
}

// cancelTasks ends the work of every running task (the kit runs one at a time in tests).
func (k *Kit) cancelTasks(context.Context, any, *mcp.CancelTaskRequest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, cancel := range k.tasks {
		cancel()
	}
}

func (k *Kit) addTaskTools() {
	k.Server.AddTool(mcp.NewTool("research", mcp.WithDescription("Researches for a while, as a task."),
		mcp.WithNumber("steps", mcp.Required()), mcp.WithNumber("seconds"),
		mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		k.counted("research", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			work, done := k.taskWork(ctx)
			defer done()
			steps := r.GetInt("steps", 1)
			token := progressToken(r)
			for i := 1; i <= steps; i++ {
				if token != nil {
					_ = k.Server.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
						"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d of %d", i, steps),
					})
				}
			}
			return k.wait(work, "research", r.GetFloat("seconds", 0), "researched")
		}))
}
