package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/config"
	"relaybot/store"
)

// dbDown is a usage log and an audit log whose database cannot be reached: its errors name the
// user, the database and the host, as a driver's do.
type dbDown struct{}

var errDBDown = errors.New(`failed to connect to user=relay database=relaybot host=10.1.2.3: password authentication failed`)

func (dbDown) Usage(context.Context, store.UsageFilter) ([]store.UsageRow, error) { return nil, errDBDown }
func (dbDown) ToolCalls(context.Context, audit.Filter) ([]audit.Record, string, error) {
	return nil, "", errDBDown
}
func (dbDown) ToolCall(context.Context, int64) (audit.Record, error)         { return audit.Record{}, errDBDown }
func (dbDown) ToolStats(context.Context, audit.Filter) ([]audit.Stat, error) { return nil, errDBDown }

// A command whose store query fails tells the member what a failed turn tells them (the
// failure hint, or nothing with "hide"), never the driver's error naming the database.
func TestCommandFailuresShowTheHintNotTheDatabase(t *testing.T) {
	for _, tt := range []struct {
		mode config.ExceptionHandling
		want []string
	}{
		{config.ShowHint, []string{"Request failed."}},
		{config.Hide, nil},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			h := newHarness(t, Options{Access: Access{Admins: []string{"telegram:1"}},
				Output: OutputOptions{ExceptionHandling: tt.mode}})
			h.p.opts.Usage = dbDown{}
			h.p.opts.Audit = dbDown{}
			for i, cmd := range []string{"/usage", "/usage all", "/audit"} {
				out := &recResponder{}
				<-h.handle(privateMsg("1", string(rune('a'+i)), cmd), out)
				n := out.Notices()
				if strings.Join(n, "|") != strings.Join(tt.want, "|") {
					t.Errorf("%s with the database down told the admin %q, want %q", cmd, n, tt.want)
				}
			}
		})
	}
}
