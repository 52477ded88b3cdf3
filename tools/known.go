package tools

import "context"

// Has reports whether a tool of that name exists now in any loader (collisions resolved, access
// rules not applied). Metrics use it so that only real tool names become labels.
func (m *Manager) Has(name string) bool {
	_, index := m.catalog(context.Background())
	_, ok := index[name]
	return ok
}
