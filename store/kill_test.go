package store

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"relaybot/audit"
	"relaybot/chat"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The helper process of TestKillMidCall: it records the start of a tool call, says so on stdout
// and waits to be killed.
const killHelperEnv = "STORE_TEST_KILL_HELPER_DSN"

func killHelper(dsn, driver string) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Driver: driver, DSN: dsn})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "k"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	turn, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "run the slow tool"}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	rec := &audit.Record{TurnID: turn, ConversationID: c.ID, ToolName: "slow", Source: "mcp", Server: "srv", ToolCallID: "call_k"}
	if err := s.ToolCalls.StartToolCall(ctx, rec); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("started", rec.ID, turn)
	// The tool "runs" until the process is killed; the parent never closes our stdin.
	io.Copy(io.Discard, os.Stdin)
	os.Exit(3)
}

// TestKillMidCall kills (SIGKILL) a process in the middle of a tool call: its audit row is there,
// running, and the next start marks it and its turn interrupted.
func TestKillMidCall(t *testing.T) {
	if dsn := os.Getenv(killHelperEnv); dsn != "" {
		killHelper(dsn, os.Getenv(killHelperEnv+"_DRIVER"))
		return
	}
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		opts := testOptions(t, driver)
		s := openTest(t, opts)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		cmd := exec.Command(os.Args[0], "-test.run=^TestKillMidCall$")
		cmd.Env = append(os.Environ(), killHelperEnv+"="+opts.DSN, killHelperEnv+"_DRIVER="+driver)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q: %v", line, err)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "started" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q", line)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("helper ended with %v, want killed by SIGKILL", err)
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		turnID, _ := strconv.ParseInt(f[2], 10, 64)

		s2 := openTest(t, opts)
		row, err := s2.ToolCalls.ToolCall(ctx, id)
		if err != nil {
			t.Fatalf("the killed call left no row: %v", err)
		}
		if row.Status != audit.StatusRunning || row.ToolName != "slow" || row.Server != "srv" {
			t.Fatalf("row after kill = %+v, want the running call", row)
		}
		turns, calls, err := s2.Turns.Recover(ctx)
		if err != nil || turns != 1 || calls != 1 {
			t.Fatalf("Recover = %d, %d, %v; want 1 turn and 1 call", turns, calls, err)
		}
		row, _ = s2.ToolCalls.ToolCall(ctx, id)
		tr, _ := s2.Turns.Turn(ctx, turnID)
		if row.Status != audit.StatusInterrupted || tr.Status != TurnInterrupted {
			t.Errorf("after Recover: call %s, turn %s; want both interrupted", row.Status, tr.Status)
		}
	})
}
