package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// replicaCounts parses -replicas: one count, or a list run in turn. A list, or a single count
// above one, gets a run of one replica first to compare with.
func replicaCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("replicas: %q is not a count of 1 to 16", f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("replicas: %d is listed twice", n)
		}
		out = append(out, n)
	}
	if len(out) == 1 && out[0] == 1 {
		return out, nil
	}
	if i := slices.Index(out, 1); i > 0 {
		out = slices.Delete(out, i, i+1)
	}
	if out[0] != 1 {
		out = append([]int{1}, out...)
	}
	return out, nil
}

// Comparison is one run of a replica comparison beside the run of one replica.
type Comparison struct {
	Replicas       int     `json:"replicas"`
	TurnsDone      int     `json:"turns_done"`
	TurnsPerSecond float64 `json:"turns_per_second"`
	// ThroughputRatio is turns/s over the one-replica run's; CPURatio CPU per turn (all
	// replicas together) over the one-replica run's.
	ThroughputRatio float64 `json:"throughput_ratio"`
	CPUPer1kTurns   float64 `json:"bot_cpu_seconds_per_1k_turns"`
	CPURatio        float64 `json:"cpu_per_turn_ratio"`
	// DBCPUPer1kTurns is the PostgreSQL server's CPU per 1k turns, -1 when not measured.
	DBCPUPer1kTurns float64 `json:"db_server_cpu_seconds_per_1k_turns"`
	AnswerP50       float64 `json:"answer_p50_ms"`
	AnswerP99       float64 `json:"answer_p99_ms"`
	FirstP50        float64 `json:"first_text_p50_ms"`
	FirstP99        float64 `json:"first_text_p99_ms"`
	// VisibleP50 and VisibleP99 are to the first visible text: a draft, a send or an edit.
	VisibleP50   float64 `json:"first_visible_p50_ms"`
	VisibleP99   float64 `json:"first_visible_p99_ms"`
	HTTP429      int64   `json:"http_429"`
	Missing      int     `json:"answers_missing"`
	Duplicated   int     `json:"answers_duplicated"`
	OthersCPUPct float64 `json:"others_cpu_pct"`
}

// compareMain runs the load once per replica count, the first (one replica) being the
// reference, all with the same Telegram mode (webhook unless -telegram says otherwise) and the
// same bot binary, and prints every run's report and the comparison.
func compareMain(ctx context.Context, o Options, counts []int, command string, asJSON bool, stdout io.Writer) error {
	if o.Telegram == "" {
		o.Telegram = "webhook"
	}
	if o.Bot == "" {
		dir, err := os.MkdirTemp("", "relaybot-loadtest-bin-")
		if err != nil {
			return fmt.Errorf("making a build folder: %w", err)
		}
		defer os.RemoveAll(dir)
		o.Log.Info("building the bot")
		bin, err := buildBot(ctx, o.Src, dir)
		if err != nil {
			return err
		}
		o.Bot = bin
	}
	var reports []*Report
	var errs []error
	for i, n := range counts {
		ro := o
		ro.Replicas = n
		ro.Baseline = o.Baseline && i == 0 // the bare client's cost does not depend on the bot
		if o.WorkDir != "" {
			ro.WorkDir = filepath.Join(o.WorkDir, fmt.Sprintf("replicas-%d", n))
		}
		if o.ProfileDir != "" {
			ro.ProfileDir = filepath.Join(o.ProfileDir, fmt.Sprintf("replicas-%d", n))
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "--- %d replica(s)\n", n)
		}
		rep, err := Run(ctx, ro)
		if err != nil {
			errs = append(errs, fmt.Errorf("%d replica(s): %w", n, err))
		}
		if rep == nil {
			break
		}
		rep.Command = command
		reports = append(reports, rep)
	}
	rows := compare(reports)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Command    string       `json:"command"`
			Runs       []*Report    `json:"runs"`
			Comparison []Comparison `json:"comparison"`
		}{command, reports, rows}); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		return errors.Join(errs...)
	}
	for _, rep := range reports {
		fmt.Fprintf(stdout, "=== %d replica(s)\n", rep.Replicas)
		rep.WriteText(stdout)
		fmt.Fprintln(stdout)
	}
	if len(rows) > 0 {
		writeComparison(stdout, rows)
	}
	return errors.Join(errs...)
}

// compare puts each run beside the first.
func compare(reports []*Report) []Comparison {
	var rows []Comparison
	for _, r := range reports {
		c := Comparison{
			Replicas: r.Replicas, TurnsDone: r.TurnsDone, TurnsPerSecond: r.TurnsPerSecond, CPUPer1kTurns: r.BotCPUPer1kTurns,
			AnswerP50: r.Answer.P50, AnswerP99: r.Answer.P99, FirstP50: r.FirstText.P50, FirstP99: r.FirstText.P99,
			VisibleP50: r.FirstVisible.P50, VisibleP99: r.FirstVisible.P99,
			DBCPUPer1kTurns: -1, HTTP429: r.HTTP429, Missing: r.AnswersMissing, Duplicated: r.AnswersDuplicated, OthersCPUPct: r.OthersCPUPct,
		}
		if r.DBServerCPUSeconds >= 0 {
			c.DBCPUPer1kTurns = r.DBServerCPUPer1k
		}
		if ref := reports[0]; ref.TurnsPerSecond > 0 && ref.BotCPUPer1kTurns > 0 {
			c.ThroughputRatio = r.TurnsPerSecond / ref.TurnsPerSecond
			c.CPURatio = r.BotCPUPer1kTurns / ref.BotCPUPer1kTurns
		}
		rows = append(rows, c)
	}
	return rows
}

// writeComparison prints the comparison as a table.
func writeComparison(w io.Writer, rows []Comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "replicas\tturns\tturns/s\t× 1 replica\tcpu s/1k turns\t× 1 replica\tpostgres cpu s/1k turns\twhole answer p50 / p99\tfirst visible p50 / p99\tfirst text p50 / p99\t429s\tmissing\tduplicated\tothers' cpu")
	for _, c := range rows {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.2f\t%.3f\t%.2f\t%s\t%.0f / %.0f ms\t%.0f / %.0f ms\t%.0f / %.0f ms\t%d\t%d\t%d\t%.0f%%\n",
			c.Replicas, c.TurnsDone, c.TurnsPerSecond, c.ThroughputRatio, c.CPUPer1kTurns, c.CPURatio, dbCPU(c.DBCPUPer1kTurns),
			c.AnswerP50, c.AnswerP99, c.VisibleP50, c.VisibleP99, c.FirstP50, c.FirstP99, c.HTTP429, c.Missing, c.Duplicated, c.OthersCPUPct)
	}
	tw.Flush()
}

func dbCPU(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}
