package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// webhookProxy stands in front of the replicas' Telegram webhook servers as a load balancer
// would: each update goes to the next replica in turn, so every replica takes updates; a replica
// that cannot be reached is skipped for the next one.
type webhookProxy struct {
	srv    *http.Server
	ln     net.Listener
	client *http.Client
	done   chan struct{}

	mu       sync.Mutex
	backends []string // host:port of each replica's webhook server
	next     int
}

// startWebhookProxy listens on a free loopback port and serves until close.
func startWebhookProxy() (*webhookProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook proxy: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	p := &webhookProxy{ln: ln, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, done: make(chan struct{})}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// url is the webhook URL the replicas register with Telegram.
func (p *webhookProxy) url() string { return "http://" + p.ln.Addr().String() + "/hook" }

// setBackends replaces the replicas the proxy forwards to.
func (p *webhookProxy) setBackends(addrs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = append([]string(nil), addrs...)
}

// ServeHTTP forwards the request to the next replica in turn, or the one after it when that one
// cannot be reached, and answers with the replica's status.
func (p *webhookProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	backends := p.backends
	first := p.next
	p.next++
	p.mu.Unlock()
	for i := range backends {
		addr := backends[(first+i)%len(backends)]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := p.client.Do(req)
		if err != nil {
			if errors.Is(r.Context().Err(), context.Canceled) {
				return
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		return
	}
	http.Error(w, "no replica answered", http.StatusBadGateway)
}

// close stops the proxy.
func (p *webhookProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	<-p.done
	p.client.CloseIdleConnections()
}
