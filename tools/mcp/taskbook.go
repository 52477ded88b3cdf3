package mcp

import (
	"context"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// TaskBook keeps the MCP tasks of this process's calls in flight on remote servers (sse, http),
// across restarts and replicas (the store), so that a task whose process stopped without ending
// it (a crash, a killed container) is cancelled on the server by the next process to connect
// the server, instead of running on until the server's TTL ends it. A stdio server's tasks end
// with its process, which ends with the bot's. Its errors are logged, never fatal.
type TaskBook interface {
	// BeginTask records that server made a call of this process the task taskID.
	BeginTask(ctx context.Context, server, taskID, protocol string) error
	// EndTask forgets a task this process is done with.
	EndTask(ctx context.Context, server, taskID string) error
	// TakeLeftTasks returns, once across processes, the ids of the tasks of server that
	// processes now gone left in flight.
	TakeLeftTasks(ctx context.Context, server string) ([]string, error)
}

// WithTaskBook records the tasks of calls in flight in b and cancels the ones a stopped process
// left when a server is connected.
func WithTaskBook(b TaskBook) Option {
	return func(o *options) { o.tasks = b }
}

// booked reports whether the server's tasks are kept in the task book: a remote server's,
// which outlive the bot's process.
func (s *serverConn) booked() bool {
	return s.opts.tasks != nil && (s.cfg.Transport == TransportHTTP || s.cfg.Transport == TransportSSE)
}

// beginTask records that the server made a call the task id, on the session's protocol.
func (s *serverConn) beginTask(ctx context.Context, sess *session, id string) {
	if !s.booked() {
		return
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), memoryTimeout)
	defer cancel()
	if err := s.opts.tasks.BeginTask(bctx, s.cfg.Name, id, sess.version); err != nil {
		s.logger.Warn("MCP task not recorded; a crash now would leave it to the server's TTL", "task", id, "err", err)
	}
}

// endTask forgets the task id: its result was taken, it ended on its own, or it was cancelled.
func (s *serverConn) endTask(ctx context.Context, id string) {
	if !s.booked() {
		return
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), memoryTimeout)
	defer cancel()
	if err := s.opts.tasks.EndTask(bctx, s.cfg.Name, id); err != nil {
		s.logger.Warn("MCP task's record not removed; the next process will ask the server to cancel it", "task", id, "err", err)
	}
}

// cancelLeft asks the server, just connected on sess, to cancel the tasks stopped processes
// left running on it. A task the server no longer knows is answered with an error, logged.
func (s *serverConn) cancelLeft(ctx context.Context, sess *session) {
	if !s.booked() {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, memoryTimeout)
	ids, err := s.opts.tasks.TakeLeftTasks(tctx, s.cfg.Name)
	cancel()
	if err != nil {
		s.logger.Warn("MCP tasks left by a stopped process not read; the server's TTL ends them", "err", err)
		return
	}
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, taskCancelWait)
		var err error
		if sess.ext.on() {
			_, err = sess.ext.request(cctx, sess.client.GetTransport().SendRequest, string(mcpgo.MethodTasksCancel), id, nil)
		} else {
			_, err = sess.client.CancelTask(cctx, mcpgo.CancelTaskRequest{Params: mcpgo.CancelTaskParams{TaskId: id}})
		}
		cancel()
		if err != nil {
			s.logger.Warn("MCP task left by a stopped process not cancelled", "task", id, "err", s.redact.err(err))
			continue
		}
		s.logger.Info("MCP task left by a stopped process cancelled", "task", id)
	}
}

// leftTaskSweep is how often a connected server's left tasks are looked for again: a replica
// that dies while this one is connected leaves its tasks once a survivor took its work over.
const leftTaskSweep = 5 * time.Minute
