package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"

	"relaybot/config"
	"relaybot/pipeline"
	"testing"
)

// TestModelHTTPClientReusesConnections runs two waves of concurrent streams, as many as turns may
// run at once: the second wave must reuse the first wave's connections instead of dialling anew
// (the default transport keeps only 2 idle connections per host).
func TestModelHTTPClientReusesConnections(t *testing.T) {
	const turns = 16
	var dials atomic.Int64
	var arrived sync.WaitGroup
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // every request of the wave is in flight at once, each on its own connection
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	client := modelHTTPClient(turns)
	if client.Timeout != 0 {
		t.Fatalf("client timeout %s would cut long streams", client.Timeout)
	}
	tr := client.Transport.(*http.Transport)
	if tr.TLSHandshakeTimeout == 0 || tr.DialContext == nil {
		t.Fatalf("dial or TLS handshake unbounded: %+v", tr)
	}
	for wave := range 2 {
		arrived.Add(turns)
		var done sync.WaitGroup
		errs := make(chan error, turns)
		for range turns {
			done.Add(1)
			go func() {
				defer done.Done()
				resp, err := client.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
				}
			}()
		}
		arrived.Wait()
		release <- struct{}{} // let one through, then the rest
		for range turns - 1 {
			release <- struct{}{}
		}
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("wave %d: %v", wave, err)
		}
	}
	if got := dials.Load(); got != turns {
		t.Errorf("connections dialled over two waves of %d streams = %d, want %d (the second wave reuses the first's)", turns, got, turns)
	}
}

// TestEveryConfiguredPolicyIsOneThePipelineKnows: the config's enums reach the pipeline as its
// own types by conversion, so each value the config accepts must be spelled as the pipeline's.
func TestEveryConfiguredPolicyIsOneThePipelineKnows(t *testing.T) {
	for _, tc := range []struct{ config, pipeline []string }{
		{strs(config.Scopes), strs([]pipeline.Scope{pipeline.ScopeChat, pipeline.ScopeUser})},
		{strs(config.Busies), strs([]pipeline.Busy{pipeline.BusyQueue, pipeline.BusyInterrupt})},
		{strs(config.Reasonings), strs([]pipeline.Reasoning{pipeline.ReasoningCollapsed, pipeline.ReasoningHidden, pipeline.ReasoningInline})},
		{strs(config.ExceptionHandlings), strs([]pipeline.ExceptionHandling{pipeline.ShowHint, pipeline.ShowError, pipeline.Hide})},
	} {
		if !slices.Equal(tc.config, tc.pipeline) {
			t.Errorf("the config accepts %q, the pipeline knows %q: a configured value would take the pipeline's default", tc.config, tc.pipeline)
		}
	}
}

func strs[S ~string](vs []S) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
