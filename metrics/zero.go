package metrics

import (
	"relaybot/adapters/delivery"
	"relaybot/audit"
	"relaybot/chat"
)

// genAIChat is the gen_ai.operation.name of a model call.
const genAIChat = "chat"

// DefaultProvider is the gen_ai.provider.name of a model no provider is known for: every
// configured model speaks the OpenAI API.
const DefaultProvider = "openai"

// genAITokenBuckets and genAIDurationBuckets are the bucket boundaries the GenAI semantic
// conventions advise for gen_ai.client.token.usage and gen_ai.client.operation.duration.
var (
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	genAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// turnOutcomes are the statuses a turn ends with (chat.StatusOK, ...).
var turnOutcomes = []string{"ok", "error", "cancelled", "interrupted"}

// modelStatuses are the outcomes of a model call.
var modelStatuses = []chat.Status{chat.StatusOK, chat.StatusError, chat.StatusCancelled}

// genAILabels are the provider and requested model of a configured model (Unknown for both
// when the model is not configured).
func (m *Metrics) genAILabels(model string) (provider, requested string) {
	if model == Unknown {
		return Unknown, Unknown
	}
	c := m.catalog.Load()
	provider, requested = c.providers[model], c.requested[model]
	if provider == "" {
		provider = DefaultProvider
	}
	if requested == "" {
		requested = model
	}
	return provider, requested
}

// zeroModels makes every configured model's series exist at zero.
func (m *Metrics) zeroModels(models []string) {
	for _, model := range models {
		for _, st := range modelStatuses {
			m.modelCalls.WithLabelValues(model, string(st))
		}
		m.modelFirstToken.WithLabelValues(model)
		m.modelTokens.WithLabelValues(model, "in")
		m.modelTokens.WithLabelValues(model, "out")
		m.modelFallbacks.WithLabelValues(model)
		if _, ok := m.catalog.Load().prices[model]; ok {
			m.modelCost.WithLabelValues(model)
		}
		provider, requested := m.genAILabels(model)
		m.genAITokens.WithLabelValues(genAIChat, provider, requested, "input")
		m.genAITokens.WithLabelValues(genAIChat, provider, requested, "output")
		m.genAIDuration.WithLabelValues(genAIChat, provider, requested, "")
	}
}

// zeroPlatforms makes every enabled platform's delivery series exist at zero.
func (m *Metrics) zeroPlatforms(platforms []string) {
	for _, p := range platforms {
		m.sends.WithLabelValues(p)
		m.edits.WithLabelValues(p)
		m.rateLimited.WithLabelValues(p)
		for _, k := range []delivery.EventKind{delivery.EventSend, delivery.EventEdit, delivery.EventRateLimited, delivery.EventFailed} {
			for _, final := range []string{"false", "true"} {
				m.deliveryEvents.WithLabelValues(p, k.String(), final)
			}
		}
	}
}

// zeroTools makes the series of every tool that exists now exist, at zero until its first call.
func (m *Metrics) zeroTools() {
	if m == nil {
		return
	}
	m.mu.RLock()
	names := m.toolNames
	m.mu.RUnlock()
	if names == nil {
		return
	}
	for _, name := range names() {
		for _, st := range audit.Statuses {
			if st != audit.StatusRunning {
				m.toolCalls.WithLabelValues(name, string(st))
			}
		}
		m.toolDuration.WithLabelValues(name)
	}
}
