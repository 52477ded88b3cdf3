package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"relaybot/audit"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/store"
)

// Report is what one run measured. Times are milliseconds, CPU is seconds, memory MB or KB as
// the names say.
type Report struct {
	Command       string  `json:"command"`
	Chats         int     `json:"chats"`
	TurnsPerChat  int     `json:"turns_per_chat,omitempty"`
	Duration      string  `json:"duration,omitempty"`
	ThinkMS       int64   `json:"think_ms"`
	Rate          float64 `json:"tokens_per_second"`
	Tokens        int     `json:"answer_tokens"`
	ToolShare     float64 `json:"tool_share"`
	Tool          string  `json:"tool"`
	ToolLatencyMS int64   `json:"tool_latency_ms"`
	// GlobalPerSecond is Telegram's budget for the whole bot in this run; Database the bot's.
	GlobalPerSecond int    `json:"global_per_second"`
	Database        string `json:"database"`
	// Replicas is the number of `bot serve` processes on the database; Telegram how they
	// received updates (polling, or webhook through the round-robin proxy).
	Replicas int    `json:"replicas"`
	Telegram string `json:"telegram"`
	// OTelSpans counts the spans the bots exported to the loopback receiver (-otel).
	OTelSpans int `json:"otel_spans,omitempty"`

	WallSeconds    float64 `json:"wall_seconds"`
	TurnsSent      int     `json:"turns_sent"`
	TurnsDone      int     `json:"turns_done"`
	TurnsTimedOut  int     `json:"turns_timed_out"`
	TurnsPerSecond float64 `json:"turns_per_second"`
	PeakInFlight   int64   `json:"peak_turns_in_flight"`

	// ChatType is the run's chats: private, group or mix (-chat-type).
	ChatType string `json:"chat_type"`
	// FirstVisible is from the user's message to the first text of the answer the user sees: a
	// draft (private chats), a send or an edit, whichever came first. FirstText is to the first
	// message sent or edited (in a private chat streaming drafts, that is the final text);
	// Answer to the whole answer.
	FirstVisible Latency `json:"first_visible_ms"`
	FirstText    Latency `json:"first_text_ms"`
	Answer       Latency `json:"answer_ms"`
	// Final is from the model's last token to the whole answer showing in the chat; FinalFree
	// is the same over the turns whose final text Telegram's budget did not hold back (see
	// budgetFree), and FinalFreeWithin100 the share of those within 100 ms.
	Final              Latency `json:"final_after_last_token_ms"`
	FinalFree          Latency `json:"final_after_last_token_budget_free_ms"`
	FinalFreeWithin100 float64 `json:"budget_free_final_within_100ms_pct"`

	// DraftsPerReply, EditsPerReply and SendsPerReply count the successful requests of each
	// kind per answer: the previews are the drafts and the edits.
	DraftsPerReply float64 `json:"drafts_per_reply"`
	EditsPerReply  float64 `json:"edits_per_reply"`
	SendsPerReply  float64 `json:"sends_per_reply"`
	// Surfaces gives the figures a user sees per kind of chat: private chats (previews are
	// drafts) and groups (previews are a message and its edits), those the run had.
	Surfaces []Surface `json:"surfaces"`

	HTTP429     int64 `json:"http_429"`
	NotModified int64 `json:"not_modified"`
	FailedCalls int64 `json:"failed_calls"`
	LateCalls   int64 `json:"calls_after_final"`
	StrayCalls  int64 `json:"stray_calls"`

	// AnswersWhole counts the bot's messages carrying a whole answer, after the bots stopped;
	// each message sent should have exactly one. AnswersMissing are messages with none,
	// AnswersDuplicated answers beyond the first to one message (a turn run twice, by two
	// replicas or after a redelivery).
	AnswersWhole      int `json:"answers_whole"`
	AnswersMissing    int `json:"answers_missing"`
	AnswersDuplicated int `json:"answers_duplicated"`

	Streams        int64 `json:"model_streams"`
	StreamedTokens int64 `json:"streamed_tokens"`

	// BotCPUSeconds and the figures per turn and token are summed over the replicas;
	// ReplicaCPUSeconds is each one's share.
	BotCPUSeconds     float64   `json:"bot_cpu_seconds"`
	ReplicaCPUSeconds []float64 `json:"replica_cpu_seconds"`
	// DBServerCPUSeconds is the CPU of the PostgreSQL server processes serving the bots'
	// connections during the load, when the server runs on this machine; -1 when not measured.
	DBServerCPUSeconds float64         `json:"db_server_cpu_seconds"`
	DBServerCPUPer1k   float64         `json:"db_server_cpu_seconds_per_1k_turns,omitempty"`
	BotCPUPer1kTurns   float64         `json:"bot_cpu_seconds_per_1k_turns"`
	BotCPUPer1kTokens  float64         `json:"bot_cpu_seconds_per_1k_tokens"`
	Baseline           *baselineResult `json:"baseline,omitempty"`
	BareCPUPer1kToken  float64         `json:"bare_cpu_seconds_per_1k_tokens,omitempty"`
	CPURatio           float64         `json:"cpu_per_token_ratio_to_bare,omitempty"`

	// Memory and goroutines are summed over the replicas.
	IdleRSSMB float64 `json:"idle_rss_mb"`
	// IdleAnonMB is the anonymous part of the idle RSS: the bot's own memory, without the
	// executable's and libraries' file pages.
	IdleAnonMB float64 `json:"idle_anon_mb"`
	// IdleColdStart is whether the bot binary was dropped from the page cache before the bots
	// started, as after a fresh deploy: its file pages in the idle RSS are then those a start
	// reads from disk, whatever wrote the binary (see dropFromPageCache).
	IdleColdStart bool    `json:"idle_cold_start"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	MemPerTurnKB  float64 `json:"memory_per_turn_in_flight_kb"`
	// PeakAnonMB is the largest anonymous RSS sampled (every 100 ms) during the load, and
	// AnonPerTurnKB its growth over idle per turn in flight: the bot's own memory per turn,
	// without the executable's file pages, whose share of RSS depends on the page cache (the
	// same binary copied anew idles a few MB lower or higher).
	PeakAnonMB      float64 `json:"peak_anon_mb"`
	AnonPerTurnKB   float64 `json:"anon_per_turn_in_flight_kb"`
	GoroutinesIdle  int     `json:"goroutines_idle"`
	GoroutinesAfter int     `json:"goroutines_after"`
	// GoroutinesKeepAlive are the goroutines of pooled idle HTTP connections among those after.
	GoroutinesKeepAlive int `json:"goroutines_after_keepalive"`

	DB DBCounts `json:"db"`

	LoadAvgStart       string   `json:"loadavg_start"`
	LoadAvgEnd         string   `json:"loadavg_end"`
	MachineBusyPct     float64  `json:"machine_busy_pct"`
	OthersCPUPct       float64  `json:"others_cpu_pct"`
	LoadToolCPUSeconds float64  `json:"loadtool_cpu_seconds"`
	Profiles           []string `json:"profiles,omitempty"`
}

// Surface is what the users of one kind of chat saw.
type Surface struct {
	// Surface is "private" or "group"; Chats and Turns how many of the run's were of it.
	Surface string `json:"surface"`
	Chats   int    `json:"chats"`
	Turns   int    `json:"turns_done"`
	// FirstVisible, FirstText and Answer are as in Report; Final is the model's last token →
	// the whole answer in the chat.
	FirstVisible   Latency `json:"first_visible_ms"`
	FirstText      Latency `json:"first_text_ms"`
	Answer         Latency `json:"answer_ms"`
	Final          Latency `json:"final_after_last_token_ms"`
	DraftsPerReply float64 `json:"drafts_per_reply"`
	EditsPerReply  float64 `json:"edits_per_reply"`
	SendsPerReply  float64 `json:"sends_per_reply"`
}

// surfaceTally gathers one surface's turns for its Surface.
type surfaceTally struct {
	chats                       int
	turns, drafts, edits, sends int
	visible, first, answer      []time.Duration
	final                       []time.Duration
}

// add counts a finished turn.
func (t *surfaceTally) add(res turnResult) {
	t.turns++
	t.drafts, t.edits, t.sends = t.drafts+res.drafts, t.edits+res.edits, t.sends+res.sends
	if !res.visible.IsZero() {
		t.visible = append(t.visible, res.visible.Sub(res.sent))
	}
	if !res.first.IsZero() {
		t.first = append(t.first, res.first.Sub(res.sent))
	}
	t.answer = append(t.answer, res.final.Sub(res.sent))
	if !res.lastToken.IsZero() {
		t.final = append(t.final, res.final.Sub(res.lastToken))
	}
}

// surface summarises the tally as name's Surface.
func (t *surfaceTally) surface(name string) Surface {
	s := Surface{Surface: name, Chats: t.chats, Turns: t.turns, FirstVisible: latency(t.visible), FirstText: latency(t.first),
		Answer: latency(t.answer), Final: latency(t.final)}
	if t.turns > 0 {
		n := float64(t.turns)
		s.DraftsPerReply, s.EditsPerReply, s.SendsPerReply = float64(t.drafts)/n, float64(t.edits)/n, float64(t.sends)/n
	}
	return s
}

// fillSurfaces gives each surface of the run its figures, private chats first.
func (r *Report) fillSurfaces(rec *recorder, results []turnResult) {
	tallies := map[string]*surfaceTally{}
	for _, c := range rec.chats {
		t := tallies[c.surface]
		if t == nil {
			t = &surfaceTally{}
			tallies[c.surface] = t
		}
		t.chats++
	}
	for _, res := range results {
		if !res.timedOut {
			tallies[res.surface].add(res)
		}
	}
	r.Surfaces = nil
	for _, name := range []string{surfacePrivate, surfaceGroup} {
		if t := tallies[name]; t != nil {
			r.Surfaces = append(r.Surfaces, t.surface(name))
		}
	}
}

// Latency summarises durations in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// DBCounts compares the database with what the run sent.
type DBCounts struct {
	TurnsExpected int64            `json:"turns_expected"`
	Turns         int64            `json:"turns"`
	TurnsOK       int64            `json:"turns_ok"`
	TurnStatuses  map[string]int64 `json:"turn_statuses"`
	AuditExpected int64            `json:"audit_rows_expected"`
	AuditRows     int64            `json:"audit_rows"`
	AuditOK       int64            `json:"audit_rows_ok"`
}

// latency summarises ds with nearest-rank percentiles.
func latency(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ms(ds[max(0, min(i, len(ds)-1))])
	}
	return Latency{N: len(ds), P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

// fill computes the figures of the turns.
func (r *Report) fill(rec *recorder, results []turnResult, wall, cpu time.Duration, peakRSS, idleRSS, peakInFlight int64) {
	r.WallSeconds = wall.Seconds()
	r.TurnsSent = len(results)
	r.PeakInFlight = peakInFlight
	global := sortedTimes(rec.global)
	perChat := make([][]time.Time, len(rec.chats))
	for i, c := range rec.chats {
		perChat[i] = sortedTimes(c.calls)
	}
	var lasts, finals []time.Time
	for _, t := range results {
		if !t.timedOut && !t.lastToken.IsZero() {
			lasts, finals = append(lasts, t.lastToken), append(finals, t.final)
		}
	}
	pending := pendingFinals(lasts, finals)
	var visible, first, answer, final, free []time.Duration
	drafts, edits, sends, within, k := 0, 0, 0, 0, 0
	for _, t := range results {
		if t.timedOut {
			r.TurnsTimedOut++
			continue
		}
		r.TurnsDone++
		drafts += t.drafts
		edits += t.edits
		sends += t.sends
		if !t.visible.IsZero() {
			visible = append(visible, t.visible.Sub(t.sent))
		}
		if !t.first.IsZero() {
			first = append(first, t.first.Sub(t.sent))
		}
		answer = append(answer, t.final.Sub(t.sent))
		if t.lastToken.IsZero() {
			continue
		}
		d := t.final.Sub(t.lastToken)
		final = append(final, d)
		if budgetFree(perChat[t.chat], global, t.lastToken, pending[k], r.GlobalPerSecond) {
			free = append(free, d)
			if d <= 100*time.Millisecond {
				within++
			}
		}
		k++
	}
	r.FirstVisible, r.FirstText, r.Answer = latency(visible), latency(first), latency(answer)
	r.Final, r.FinalFree = latency(final), latency(free)
	r.fillSurfaces(rec, results)
	if len(free) > 0 {
		r.FinalFreeWithin100 = 100 * float64(within) / float64(len(free))
	}
	if r.TurnsDone > 0 {
		r.DraftsPerReply = float64(drafts) / float64(r.TurnsDone)
		r.EditsPerReply = float64(edits) / float64(r.TurnsDone)
		r.SendsPerReply = float64(sends) / float64(r.TurnsDone)
	}
	if wall > 0 {
		r.TurnsPerSecond = float64(r.TurnsDone) / wall.Seconds()
	}
	r.HTTP429, r.NotModified, r.FailedCalls = rec.http429.Load(), rec.notModified.Load(), rec.failed.Load()
	r.LateCalls, r.StrayCalls = rec.late.Load(), rec.strays.Load()
	r.Streams, r.StreamedTokens = rec.streams.Load(), rec.tokens.Load()
	r.fillCost(cpu, peakRSS, idleRSS, peakInFlight)
}

// fillCost computes the bots' CPU per turn and token and their memory per turn in flight.
func (r *Report) fillCost(cpu time.Duration, peakRSS, idleRSS, peakInFlight int64) {
	r.BotCPUSeconds = cpu.Seconds()
	if r.TurnsDone > 0 {
		r.BotCPUPer1kTurns = 1000 * cpu.Seconds() / float64(r.TurnsDone)
	}
	if r.StreamedTokens > 0 {
		r.BotCPUPer1kTokens = 1000 * cpu.Seconds() / float64(r.StreamedTokens)
	}
	if r.TurnsDone > 0 && r.DBServerCPUSeconds > 0 {
		r.DBServerCPUPer1k = 1000 * r.DBServerCPUSeconds / float64(r.TurnsDone)
	}
	r.PeakRSSMB = mb(peakRSS)
	if peakInFlight > 0 {
		r.MemPerTurnKB = float64(peakRSS-idleRSS) / 1024 / float64(peakInFlight)
		if r.PeakAnonMB > 0 {
			r.AnonPerTurnKB = (r.PeakAnonMB - r.IdleAnonMB) * 1024 / float64(peakInFlight)
		}
	}
}

// countAnswers counts, in every chat of the run, the bot's messages carrying the whole answer
// against the messages the chat sent: each message is to be answered exactly once, whichever
// replica took it. Call it after the bots stopped, so a turn run twice has shown.
func (r *Report) countAnswers(rec *recorder, tg *tgkit.Server, results []turnResult) {
	sent := make([]int, len(rec.chats))
	for _, t := range results {
		sent[t.chat]++
	}
	for i, c := range rec.chats {
		whole := 0
		for _, m := range tg.BotMessages(c.id) {
			if strings.TrimSpace(m.Text) == rec.expect {
				whole++
			}
		}
		r.AnswersWhole += whole
		r.AnswersMissing += max(0, sent[i]-whole)
		r.AnswersDuplicated += max(0, whole-sent[i])
	}
}

// countDB counts turns and audit rows in the stopped bot's database.
func (r *Report) countDB(ctx context.Context, driver, dsn string, turns, toolCalls int64) error {
	r.DB = DBCounts{TurnsExpected: turns, AuditExpected: toolCalls, TurnStatuses: map[string]int64{}}
	st, err := store.Open(ctx, store.Options{Driver: driver, DSN: dsn})
	if err != nil {
		return fmt.Errorf("opening the bot's database: %w", err)
	}
	defer st.Close()
	stats, err := st.ToolCalls.ToolStats(ctx, audit.Filter{})
	if err != nil {
		return fmt.Errorf("counting audit rows: %w", err)
	}
	for _, s := range stats {
		r.DB.AuditRows += int64(s.Count)
		r.DB.AuditOK += int64(s.Count - s.Errors)
	}
	byStatus, err := st.Turns.TurnStatusCounts(ctx, store.TurnFilter{})
	if err != nil {
		return fmt.Errorf("counting turns: %w", err)
	}
	for status, n := range byStatus {
		r.DB.TurnStatuses[status] = int64(n)
		r.DB.Turns += int64(n)
	}
	r.DB.TurnsOK = r.DB.TurnStatuses[string(store.TurnOK)]
	return nil
}

// check says what the run got wrong: a turn or audit row missing or failed, a 429, an answer
// that never came.
func (r *Report) check() error {
	var errs []error
	if r.DB.Turns != r.DB.TurnsExpected || r.DB.TurnsOK != r.DB.TurnsExpected {
		errs = append(errs, fmt.Errorf("turns: %d expected, %d in the database (%d ok: %v)", r.DB.TurnsExpected, r.DB.Turns, r.DB.TurnsOK, r.DB.TurnStatuses))
	}
	if r.DB.AuditRows != r.DB.AuditExpected || r.DB.AuditOK != r.DB.AuditExpected {
		errs = append(errs, fmt.Errorf("audit rows: %d expected, %d in the database (%d ok)", r.DB.AuditExpected, r.DB.AuditRows, r.DB.AuditOK))
	}
	if r.HTTP429 > 0 {
		errs = append(errs, fmt.Errorf("the bot received %d 429 answers", r.HTTP429))
	}
	if r.AnswersMissing > 0 || r.AnswersDuplicated > 0 {
		errs = append(errs, fmt.Errorf("answers: %d messages not answered, %d answered more than once", r.AnswersMissing, r.AnswersDuplicated))
	}
	if r.TurnsTimedOut > 0 {
		errs = append(errs, fmt.Errorf("%d answers did not arrive whole", r.TurnsTimedOut))
	}
	return errors.Join(errs...)
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	lat := func(l Latency) string {
		if l.N == 0 {
			return "n/a"
		}
		return fmt.Sprintf("p50 %.1f  p95 %.1f  p99 %.1f  max %.1f ms  (n=%d)", l.P50, l.P95, l.P99, l.Max, l.N)
	}
	load := fmt.Sprintf("turns/chat %d", r.TurnsPerChat)
	if r.Duration != "" {
		load = "duration " + r.Duration
	}
	p("%s", r.Command)
	load += fmt.Sprintf(", %d ms between answer and next message", r.ThinkMS)
	p("load:            %d chats (%s), %s; %d tokens at %g tok/s; tool %s in %.0f%% of turns (latency %d ms)",
		r.Chats, r.ChatType, load, r.Tokens, r.Rate, r.Tool, 100*r.ToolShare, r.ToolLatencyMS)
	p("budget, db:      %d drafts, sends and edits/s for the whole bot; %s; %d replica(s), Telegram %s", r.GlobalPerSecond, r.Database, r.Replicas, r.Telegram)
	p("turns:           %d sent, %d answered whole, %d timed out in %.1f s: %.1f turns/s (peak %d in flight)",
		r.TurnsSent, r.TurnsDone, r.TurnsTimedOut, r.WallSeconds, r.TurnsPerSecond, r.PeakInFlight)
	p("first visible:   %s (draft, send or edit)", lat(r.FirstVisible))
	p("first text:      %s (send or edit)", lat(r.FirstText))
	p("whole answer:    %s", lat(r.Answer))
	p("answers:         %d whole in the chats; %d messages not answered, %d answered more than once", r.AnswersWhole, r.AnswersMissing, r.AnswersDuplicated)
	p("last token→final: %s", lat(r.Final))
	p("  budget free:   %s; %.1f%% within 100 ms", lat(r.FinalFree), r.FinalFreeWithin100)
	p("per reply:       %.2f drafts, %.2f edits, %.2f sends; 429s %d, not modified %d, failed %d, after final %d",
		r.DraftsPerReply, r.EditsPerReply, r.SendsPerReply, r.HTTP429, r.NotModified, r.FailedCalls, r.LateCalls)
	for _, s := range r.Surfaces {
		p("%-16s %d chats, %d answers; first visible p50 %.1f / p99 %.1f ms, whole answer p50 %.1f / p99 %.1f ms, last token→final p99 %.1f ms; per reply %.2f drafts, %.2f edits, %.2f sends",
			s.Surface+" chats:", s.Chats, s.Turns, s.FirstVisible.P50, s.FirstVisible.P99, s.Answer.P50, s.Answer.P99, s.Final.P99,
			s.DraftsPerReply, s.EditsPerReply, s.SendsPerReply)
	}
	p("model:           %d streams, %d tokens", r.Streams, r.StreamedTokens)
	p("bot cpu:         %.2f s; %.3f s per 1k turns; %.4f s per 1k tokens", r.BotCPUSeconds, r.BotCPUPer1kTurns, r.BotCPUPer1kTokens)
	if r.OTelSpans > 0 {
		p("traces:          %d spans exported over OTLP/HTTP", r.OTelSpans)
	}
	if r.DBServerCPUSeconds >= 0 {
		p("postgres cpu:    %.2f s; %.3f s per 1k turns (the server processes of the bots' connections)", r.DBServerCPUSeconds, r.DBServerCPUPer1k)
	}
	if len(r.ReplicaCPUSeconds) > 1 {
		p("  per replica:   %s s", fmtSeconds(r.ReplicaCPUSeconds))
	}
	if r.Baseline != nil {
		p("bare go-openai:  %.4f s per 1k tokens (%d streams, %d at once, %d tokens); bot/bare = %.2f×",
			r.BareCPUPer1kToken, r.Baseline.Streams, r.Baseline.Concurrency, r.Baseline.Tokens, r.CPURatio)
	}
	start := "binary as it was in the page cache"
	if r.IdleColdStart {
		start = "cold start: binary read anew from disk"
	}
	p("bot memory:      idle %.1f MB (%.1f MB anonymous; %s), peak %.1f MB (%.1f MB anonymous); %.1f KB per turn in flight (%.1f KB anonymous)",
		r.IdleRSSMB, r.IdleAnonMB, start, r.PeakRSSMB, r.PeakAnonMB, r.MemPerTurnKB, r.AnonPerTurnKB)
	p("goroutines:      %d idle before, %d after the run (%d of them idle keep-alive connections)", r.GoroutinesIdle, r.GoroutinesAfter, r.GoroutinesKeepAlive)
	p("database:        turns %d/%d expected (%d ok), audit rows %d/%d expected (%d ok)",
		r.DB.Turns, r.DB.TurnsExpected, r.DB.TurnsOK, r.DB.AuditRows, r.DB.AuditExpected, r.DB.AuditOK)
	p("machine:         %.0f%% busy during the load (others %.0f%%); load tool %.1f s cpu; loadavg %s → %s",
		r.MachineBusyPct, r.OthersCPUPct, r.LoadToolCPUSeconds, r.LoadAvgStart, r.LoadAvgEnd)
	for _, f := range r.Profiles {
		p("profile:         %s", f)
	}
}

// fmtSeconds joins seconds with one decimal.
func fmtSeconds(ss []float64) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%.1f", s)
	}
	return strings.Join(parts, " / ")
}
