package pipeline

import (
	"context"
	"strings"
)

// usage answers /usage (the sender's tokens and cost today and this month, on this
// platform) and, for admins, /usage all (everyone's, with the top users and chats).
func (c *commands) usage(r *request) {
	ctx, in, args, out, log := r.ctx, r.in, r.in.Args, r.out, r.log
	if c.opts.Usage == nil {
		c.say(out, "Usage is not available in this server.", log)
		return
	}
	all := strings.EqualFold(strings.TrimSpace(args), "all")
	if all && !c.access.IsAdmin(in) {
		c.say(out, "Only bot admins can use /usage all.", log)
		return
	}
	if !all && strings.TrimSpace(args) != "" {
		c.say(out, "Usage: /usage, or /usage all for admins.", log)
		return
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	text, err := c.quotas.Report(qctx, in, all)
	if err != nil {
		c.failed(r, "/usage", err)
		return
	}
	c.say(out, text, log)
}
