// Command fakes runs the testkit's fake model (an OpenAI-compatible API) and fake Telegram Bot
// API as one process, for checks that run the bot as a separate program: .ci/docker starts it
// on the Docker bridge's gateway address so the bot's containers reach both fakes, and drives
// it over a small HTTP control API on loopback.
//
// The model answers "call NAME ARGS" with a call of the tool NAME (ARGS: its JSON arguments,
// default {}), a tool result with "tool said: RESULT", and any other message with
// "echo: MESSAGE".
//
// Control API (JSON):
//
//	POST /telegram/send      {"chat_id": 42, "text": "hi"}: a user's private message; → {"message_id": 1}
//	GET  /telegram/messages?chat_id=42: the bot's messages in the chat that a user sees; → [{"id": 2, "text": "..."}]
//	GET  /llm/requests: every model request; → [{"tools": [...], "messages": [{"role": "user", "content": "..."}]}]
//
// When every listener is up, the addresses are written to -ready as shell assignments
// (LLM_URL, TELEGRAM_ENDPOINT, TELEGRAM_TOKEN, CONTROL_URL).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/telegram"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakes:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fakes", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1", "the address the fake model and Telegram listen on")
	control := fs.String("control", "127.0.0.1:0", "the control API's listen address")
	ready := fs.String("ready", "", "write the addresses here once listening")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	model := llm.NewServer()
	defer model.Close()
	model.SetHandler(answer)
	tg, err := telegram.New(telegram.Options{})
	if err != nil {
		return err
	}
	defer tg.Close()

	target, err := url.Parse(strings.TrimSuffix(model.URL, "/v1"))
	if err != nil {
		return fmt.Errorf("model url: %w", err)
	}
	lnModel, err := net.Listen("tcp", net.JoinHostPort(*listen, "0"))
	if err != nil {
		return fmt.Errorf("listen for the model: %w", err)
	}
	lnTG, err := net.Listen("tcp", net.JoinHostPort(*listen, "0"))
	if err != nil {
		return fmt.Errorf("listen for Telegram: %w", err)
	}
	lnCtl, err := net.Listen("tcp", *control)
	if err != nil {
		return fmt.Errorf("listen for the control API: %w", err)
	}
	servers := []*http.Server{
		{Handler: httputil.NewSingleHostReverseProxy(target)},
		{Handler: tg},
		{Handler: controlAPI(model, tg)},
	}
	errc := make(chan error, len(servers))
	for i, ln := range []net.Listener{lnModel, lnTG, lnCtl} {
		go func() { errc <- servers[i].Serve(ln) }()
	}
	if *ready != "" {
		body := fmt.Sprintf("LLM_URL=http://%s/v1\nTELEGRAM_ENDPOINT=http://%s/bot%%s/%%s\nTELEGRAM_TOKEN=%s\nCONTROL_URL=http://%s\n",
			lnModel.Addr(), lnTG.Addr(), tg.Token(), lnCtl.Addr())
		if err := os.WriteFile(*ready+".tmp", []byte(body), 0o600); err != nil {
			return err
		}
		if err := os.Rename(*ready+".tmp", *ready); err != nil {
			return err
		}
	}
	log.Info("fakes listening", "model", lnModel.Addr().String(), "telegram", lnTG.Addr().String(), "control", lnCtl.Addr().String())
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, s := range servers {
		_ = s.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// answer is the fake model: see the package comment.
func answer(req llm.Request) llm.Reply {
	if len(req.Messages) == 0 {
		return llm.Fault(400, "no messages")
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return llm.Text("tool said: ", last.Content)
	}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(last.Content), "call "); ok {
		name, args, _ := strings.Cut(rest, " ")
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		return llm.ToolCalls(llm.Call{ID: "call_1", Name: name, Args: []string{args}})
	}
	return llm.Text("echo: ", last.Content)
}

type sentMessage struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
}

type recordedMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type recordedRequest struct {
	Tools    []string          `json:"tools"`
	Messages []recordedMessage `json:"messages"`
}

func controlAPI(model *llm.Server, tg *telegram.Server) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /telegram/send", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			ChatID int64  `json:"chat_id"`
			Text   string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ChatID <= 0 || in.Text == "" {
			http.Error(w, "want {\"chat_id\": positive, \"text\": non-empty}", http.StatusBadRequest)
			return
		}
		id := tg.Send(telegram.Inbound{
			Chat: telegram.Chat{ID: in.ChatID, Type: "private"},
			From: telegram.User{ID: in.ChatID, FirstName: "Check"},
			Text: in.Text,
		})
		writeJSON(w, map[string]int{"message_id": id})
	})
	mux.HandleFunc("GET /telegram/messages", func(w http.ResponseWriter, r *http.Request) {
		chat, err := strconv.ParseInt(r.URL.Query().Get("chat_id"), 10, 64)
		if err != nil {
			http.Error(w, "want ?chat_id=N", http.StatusBadRequest)
			return
		}
		out := []sentMessage{}
		for _, m := range tg.BotMessages(chat) {
			out = append(out, sentMessage{ID: m.ID, Text: m.Text})
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /llm/requests", func(w http.ResponseWriter, r *http.Request) {
		out := []recordedRequest{}
		for _, req := range model.Requests() {
			rr := recordedRequest{Tools: req.Tools, Messages: []recordedMessage{}}
			for _, m := range req.Messages {
				rr.Messages = append(rr.Messages, recordedMessage{Role: m.Role, Content: m.Content})
			}
			out = append(out, rr)
		}
		writeJSON(w, out)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
