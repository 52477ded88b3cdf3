package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// baselineResult is what the bare client measured.
type baselineResult struct {
	Streams     int     `json:"streams"`
	Concurrency int     `json:"concurrency"`
	Tokens      int64   `json:"tokens"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
}

// baselineMain is the child process: it reads streams from the fake model with a bare go-openai
// loop and prints a baselineResult as JSON. Its own CPU time (getrusage) is all client: the
// fake model runs in the parent.
func baselineMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadtest baseline", flag.ContinueOnError)
	url := fs.String("url", "", "the model's base URL (loopback)")
	streams := fs.Int("streams", 100, "streams to read")
	conc := fs.Int("concurrency", 10, "streams at once")
	timeout := fs.Duration("timeout", 10*time.Minute, "cap on the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*url, "http://127.0.0.1:") {
		return fmt.Errorf("baseline: -url must be a loopback http://127.0.0.1:PORT address, got %q", *url)
	}
	if *streams < 1 || *streams > 1_000_000 || *conc < 1 || *conc > 20000 {
		return fmt.Errorf("baseline: -streams (1..1000000) or -concurrency (1..20000) out of range")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := readStreams(ctx, *url, *streams, *conc)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

// readStreams reads streams chat completion streams, conc at a time, joining each one's text as
// the least a client must do, and measures this process's CPU time over it.
func readStreams(ctx context.Context, baseURL string, streams, conc int) (baselineResult, error) {
	cfg := openai.DefaultConfig("baseline")
	cfg.BaseURL = baseURL
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conc
	cfg.HTTPClient = &http.Client{Transport: tr}
	client := openai.NewClientWithConfig(cfg)
	defer tr.CloseIdleConnections()

	var (
		tokens atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		first  error
	)
	jobs := make(chan int)
	cpu0, start := selfCPU(), time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				n, err := readStream(ctx, client, i)
				tokens.Add(n)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range streams {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	res := baselineResult{Streams: streams, Concurrency: conc, Tokens: tokens.Load(),
		CPUSeconds: (selfCPU() - cpu0).Seconds(), WallSeconds: time.Since(start).Seconds()}
	if first == nil {
		first = ctx.Err()
	}
	return res, first
}

// readStream reads one stream to its end and returns the content chunks it carried.
func readStream(ctx context.Context, client *openai.Client, i int) (int64, error) {
	stream, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model:         "load-model",
		Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "baseline " + strconv.Itoa(i)}},
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		return 0, fmt.Errorf("baseline stream %d: %w", i, err)
	}
	defer stream.Close()
	var text strings.Builder
	var n int64
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("baseline stream %d: %w", i, err)
		}
		if len(resp.Choices) > 0 && resp.Choices[0].Delta.Content != "" {
			text.WriteString(resp.Choices[0].Delta.Content)
			n++
		}
	}
}

// baseline runs the bare client as a child process of this binary on the fake model and puts its
// CPU per token beside the bot's.
func (r *Report) baseline(ctx context.Context, o Options, modelURL string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("baseline: finding this program: %w", err)
	}
	conc := min(o.Chats, 100)
	streams := max(3*conc, 10)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe, "-url", modelURL, "-streams", strconv.Itoa(streams),
		"-concurrency", strconv.Itoa(conc))
	cmd.Env = append(os.Environ(), roleEnv+"=baseline")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("baseline child: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var res baselineResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return fmt.Errorf("baseline child printed %q: %w", out.String(), err)
	}
	r.Baseline = &res
	if res.Tokens > 0 {
		r.BareCPUPer1kToken = 1000 * res.CPUSeconds / float64(res.Tokens)
	}
	if r.BareCPUPer1kToken > 0 {
		r.CPURatio = r.BotCPUPer1kTokens / r.BareCPUPer1kToken
	}
	return nil
}
