package main

import (
	"fmt"

	"relaybot/admin"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/coord"
	"relaybot/pipeline"
	"relaybot/tasks"
	"relaybot/tools/native"
)

// newTasks builds the scheduled tasks' service when [tasks] is enabled (nil otherwise): their
// rows are the store's, and on PostgreSQL each run is claimed under the replica's registration.
// The platforms that deliver the runs are added as they are built (taskPlatform), and the
// pipeline runs prompt tasks once serve starts the scheduler.
func (b *bot) newTasks(cfg *config.Config) error {
	if !cfg.Tasks.Enabled {
		return nil
	}
	instance := b.instance
	if instance == "" {
		// Alone on SQLite: a run this process claimed and a previous one left claimed differ
		// by this id.
		id, err := coord.NewID()
		if err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		instance = id
	}
	opts := tasks.Options{Store: b.store.Tasks, Turns: b.store.Turns, Instance: instance, Logger: b.log,
		MaxPerUser: cfg.Tasks.MaxPerUser, MinEvery: cfg.Tasks.MinEvery.D(), MisfireGrace: cfg.Tasks.MisfireGrace.D(),
		DefaultZone: cfg.Tasks.DefaultTimezone}
	if b.replica != nil {
		opts.Fence = b.replica
	}
	s, err := tasks.New(opts)
	if err != nil {
		return err
	}
	b.tasks = s
	return nil
}

// taskTools is what the native tools ask of the scheduled tasks; nil when they are off.
func (b *bot) taskTools() native.Tasks {
	if b.tasks == nil {
		return nil
	}
	return b.tasks
}

// taskCommands answers /tasks and /timezone; nil when the tasks are off.
func (b *bot) taskCommands() pipeline.TaskCommands {
	if b.tasks == nil {
		return nil
	}
	return b.tasks
}

// adminTasks is what the admin pages and API read of the tasks; nil when they are off.
func (b *bot) adminTasks() admin.Tasks {
	if b.tasks == nil {
		return nil
	}
	return b.store.Tasks
}

// taskPlatform lets the scheduled tasks deliver through platform p's adapter.
func (b *bot) taskPlatform(p chat.Platform, pl tasks.Platform) {
	if b.tasks != nil {
		b.tasks.Deliver(p, pl)
	}
}
