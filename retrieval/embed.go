package retrieval

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/chat"
	"relaybot/provider"
)

// DefaultTimeout bounds one embeddings request when its candidate sets none.
const DefaultTimeout = 120 * time.Second

// batchSize is how many texts go in one request (the API takes 2,048; smaller batches keep a
// request's tokens well under its limit).
const batchSize = 128

// maxDims bounds the vectors an endpoint may answer with: a longer one is refused, not stored.
const maxDims = 16000

// Candidate is one embeddings endpoint.
type Candidate struct {
	provider.Endpoint
	// Dimensions, when set, asks for vectors this long (text-embedding-3-* shorten theirs).
	Dimensions int
}

// EmbedderOptions configure an Embedder.
type EmbedderOptions struct {
	// Candidates are the endpoints in order: the first is primary, the others are tried when
	// one fails with an error that MovesOn (provider.ErrorKind), as chat models fall back.
	Candidates []Candidate
	// HTTPClient makes the requests (default http.DefaultClient).
	HTTPClient *http.Client
	// Observer, when set, hears of every call as it ends, failed attempts included.
	Observer provider.Observer
	// Now returns the current time (tests); nil means time.Now.
	Now func() time.Time
}

// Embedder turns texts into vectors. It is safe for concurrent use; a nil *Embedder has no
// endpoint (Enabled is false).
type Embedder struct {
	cands   []Candidate
	clients []*openai.Client
	obs     provider.Observer
	now     func() time.Time

	mu    sync.Mutex
	space Space // the primary's, once known
}

// NewEmbedder checks the options and returns an Embedder; no candidates gives nil (keywords only).
func NewEmbedder(o EmbedderOptions) (*Embedder, error) {
	if len(o.Candidates) == 0 {
		return nil, nil
	}
	e := &Embedder{obs: o.Observer, now: o.Now}
	if e.now == nil {
		e.now = time.Now
	}
	for i, c := range o.Candidates {
		if c.BaseURL == "" || c.Model == "" {
			return nil, fmt.Errorf("retrieval: embeddings candidate %d: base_url and model are required", i)
		}
		if c.Dimensions < 0 || c.Dimensions > maxDims {
			return nil, fmt.Errorf("retrieval: embeddings candidate %d: dimensions %d out of 0..%d", i, c.Dimensions, maxDims)
		}
		c.Name = c.Label()
		if c.Timeout <= 0 {
			c.Timeout = DefaultTimeout
		}
		e.cands = append(e.cands, c)
		e.clients = append(e.clients, c.Client(o.HTTPClient))
	}
	return e, nil
}

// Enabled reports whether an endpoint is configured.
func (e *Embedder) Enabled() bool { return e != nil && len(e.cands) > 0 }

// Model is the primary endpoint's model: the space stored vectors should be in.
func (e *Embedder) Model() string {
	if !e.Enabled() {
		return ""
	}
	return e.cands[0].Model
}

// Space is the primary endpoint's space: its model and the length it was asked for, or, when it
// was asked for none, the length of its first answer (one short request, whose calls are
// returned, made once per process).
func (e *Embedder) Space(ctx context.Context) (Space, []chat.ModelCall, error) {
	if !e.Enabled() {
		return Space{}, nil, errors.New("retrieval: no embeddings endpoint is configured")
	}
	if d := e.cands[0].Dimensions; d > 0 {
		return Space{Model: e.cands[0].Model, Dims: d}, nil, nil
	}
	e.mu.Lock()
	s := e.space
	e.mu.Unlock()
	if s.Valid() {
		return s, nil, nil
	}
	emb, err := e.Embed(ctx, []string{"dimension probe"})
	if err != nil {
		return Space{}, emb.Calls, err
	}
	if emb.Space.Model != e.cands[0].Model {
		return Space{}, emb.Calls, ErrFallbackAnswered
	}
	e.mu.Lock()
	e.space = emb.Space
	e.mu.Unlock()
	return emb.Space, emb.Calls, nil
}

// Embedding is the answer to Embed.
type Embedding struct {
	// Vectors are the texts' vectors in order, each of length 1.
	Vectors [][]float32
	// Space is the space they live in: the model of the candidate that answered.
	Space Space
	// Calls are the model calls made, failed attempts included, for usage and quotas.
	Calls []chat.ModelCall
}

// Embed returns the vectors of texts, all from one candidate (a batch never mixes spaces): the
// first that answers every batch. A failure that MovesOn leaves a candidate for the next; any
// other ends the attempt with the error.
func (e *Embedder) Embed(ctx context.Context, texts []string) (Embedding, error) {
	if !e.Enabled() {
		return Embedding{}, errors.New("retrieval: no embeddings endpoint is configured")
	}
	if len(texts) == 0 {
		return Embedding{}, nil
	}
	var out Embedding
	reason := ""
	for i := range e.cands {
		vecs, calls, err := e.embedWith(ctx, i, texts, reason)
		out.Calls = append(out.Calls, calls...)
		if err == nil {
			out.Vectors = vecs
			out.Space = Space{Model: e.cands[i].Model, Dims: len(vecs[0])}
			return out, nil
		}
		if ctx.Err() != nil || !provider.ErrorKindOf(err).MovesOn() || i == len(e.cands)-1 {
			return out, err
		}
		reason = err.Error()
	}
	return out, errors.New("retrieval: no embeddings candidate answered")
}

// embedWith embeds texts on candidate i, in batches.
func (e *Embedder) embedWith(ctx context.Context, i int, texts []string, reason string) ([][]float32, []chat.ModelCall, error) {
	var vecs [][]float32
	var calls []chat.ModelCall
	for start := 0; start < len(texts); start += batchSize {
		batch := texts[start:min(start+batchSize, len(texts))]
		got, call, err := e.call(ctx, i, batch, reason)
		calls = append(calls, call)
		if err != nil {
			return nil, calls, err
		}
		if len(vecs) > 0 && len(got[0]) != len(vecs[0]) {
			return nil, calls, fmt.Errorf("embeddings by %s: vectors of %d and %d numbers in one answer", e.cands[i].Name, len(vecs[0]), len(got[0]))
		}
		vecs = append(vecs, got...)
		reason = ""
	}
	return vecs, calls, nil
}

// call makes one request and checks its answer: one vector per text, all of one length.
func (e *Embedder) call(ctx context.Context, i int, texts []string, reason string) ([][]float32, chat.ModelCall, error) {
	c := e.cands[i]
	call := chat.ModelCall{Model: c.Name, Candidate: i, RequestModel: c.Model, FallbackReason: reason, StartedAt: e.now()}
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	res, err := e.clients[i].CreateEmbeddings(cctx, openai.EmbeddingRequest{
		Input: texts, Model: openai.EmbeddingModel(c.Model), Dimensions: c.Dimensions,
	})
	cancel()
	call.Duration = e.now().Sub(call.StartedAt)
	call.TimeToFirstToken = call.Duration
	var vecs [][]float32
	if err == nil {
		call.ResponseModel = string(res.Model)
		call.TokensIn = res.Usage.PromptTokens
		vecs, err = checkVectors(res, len(texts), c.Dimensions)
	}
	if err != nil {
		kind := provider.ErrorKindOf(err)
		err = fmt.Errorf("embeddings by %s (%s): %w", c.Name, kind, err)
		call.Status, call.Err = chat.StatusError, err
		if kind == provider.ErrCanceled || ctx.Err() != nil {
			call.Status = chat.StatusCancelled
		}
	} else {
		call.Status, call.FinishReason = chat.StatusOK, "stop"
		if call.TokensIn == 0 {
			call.TokensIn, call.Estimated = estimateTokens(texts), true
		}
	}
	if e.obs != nil {
		e.obs.ModelCallFinished(ctx, call)
	}
	return vecs, call, err
}

// checkVectors puts the answer's vectors in the order of the texts and refuses an answer
// missing one, with an index out of range, or with vectors of unequal, empty, oversized or
// unasked-for lengths.
func checkVectors(res openai.EmbeddingResponse, n, dims int) ([][]float32, error) {
	if len(res.Data) != n {
		return nil, fmt.Errorf("%d vectors for %d texts", len(res.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range res.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, fmt.Errorf("vector index %d out of place", d.Index)
		}
		l := len(d.Embedding)
		if l == 0 || l > maxDims || (dims > 0 && l != dims) || l != len(res.Data[0].Embedding) {
			return nil, fmt.Errorf("a vector of %d numbers (asked %d)", l, dims)
		}
		v := append([]float32(nil), d.Embedding...)
		normalize(v)
		out[d.Index] = v
	}
	return out, nil
}

// estimateTokens is a token per 4 bytes, when the endpoint reports no usage.
func estimateTokens(texts []string) int {
	n := 0
	for _, t := range texts {
		n += (len(t) + 3) / 4
	}
	return n
}
