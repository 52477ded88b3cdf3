package tools

import "context"

// Has reports whether a tool of that name exists now in any loader (collisions resolved, access
// rules not applied). Metrics use it so that only real tool names become labels.
func (m *Manager) Has(name string) bool {
	_, index := m.catalog(context.Background())
	_, ok := index[name]
	return ok
}

// Names lists the tools that exist now in every loader (collisions resolved, access rules not
// applied), in dispatch order. Metrics use it to show every tool's series from the start.
func (m *Manager) Names() []string {
	all, _ := m.catalog(context.Background())
	names := make([]string, len(all))
	for i, e := range all {
		names[i] = e.spec.Name
	}
	return names
}
