// Package lifecycle runs the long-lived parts of a server and stops them in order: the parts
// that receive work stop first, the work in flight gets a grace period to drain, and the parts
// the work needs (listeners, sweepers, tool servers) stop last. cmd/bot hands it the parts it
// wired; nothing else in the server starts goroutines of its own to supervise them.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Part is one long-running piece of a server (a platform connector, the admin listener). Run
// returns when ctx ends; an error it returns before that fails the server.
type Part struct {
	Name string
	Run  func(ctx context.Context) error
}

// Plan is what Run runs and how it stops.
type Plan struct {
	// Receivers take new work (platform connectors); they stop first, when the server shuts
	// down, and Run waits for them (and the work they handed on) after Drain.
	Receivers []Part
	// Background parts serve the work (admin, MCP, sweepers); they stop after the receivers.
	Background []Part
	// Drain lets the work in flight finish until its context ends (the grace period, cut short
	// by a value on Hurry) and then cancels the rest; it must return once that is saved.
	Drain func(ctx context.Context) error
	// Grace bounds Drain.
	Grace time.Duration
	// Hurry, when not nil, ends the grace period early on a value received after the shutdown
	// began (a second SIGTERM or Ctrl-C).
	Hurry <-chan os.Signal
	// Log receives the shutdown's steps; nil means slog.Default().
	Log *slog.Logger
}

// Run starts every part and blocks until ctx ends or a part fails, then shuts down in the
// plan's order. It returns the first part's failure, or nil after a clean stop.
func Run(ctx context.Context, p Plan) error {
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	recvCtx, stopRecv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecv()
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBg()

	failed := make(chan error, len(p.Receivers)+len(p.Background))
	var recvWG, bgWG sync.WaitGroup
	start := func(wg *sync.WaitGroup, pctx context.Context, part Part) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := part.Run(pctx); err != nil && pctx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", part.Name, err)
			}
		}()
	}
	for _, part := range p.Background {
		start(&bgWG, bgCtx, part)
	}
	for _, part := range p.Receivers {
		start(&recvWG, recvCtx, part)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new messages; running turns may finish", "grace", p.Grace)
	case runErr = <-failed:
		log.Error("shutting down: a part failed", "err", runErr)
	}

	stopRecv() // receivers stop taking work; the work they handed on keeps going
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), p.Grace)
	defer cancelGrace()
	var hurried sync.WaitGroup
	if p.Hurry != nil {
		// Drop a signal that arrived before the shutdown began (the one that started it).
		select {
		case <-p.Hurry:
		default:
		}
		hurried.Add(1)
		go func() {
			defer hurried.Done()
			select {
			case <-p.Hurry:
				log.Info("second signal: cancelling running turns now")
				cancelGrace()
			case <-graceCtx.Done():
			}
		}()
	}
	if p.Drain != nil {
		if err := p.Drain(graceCtx); err != nil {
			log.Error("drain", "err", err)
		}
	}
	cancelGrace()
	hurried.Wait()
	recvWG.Wait() // receivers return once their handlers did and their deliveries are flushed
	stopBg()
	bgWG.Wait()
	log.Info("stopped")
	return runErr
}
