package store

import (
	"context"
	"slices"
	"testing"
)

// A server's tool names are remembered across writes (the last list replaces the earlier one)
// and read back on any connection to the same database; a server never listed has none.
func TestAnMCPServersToolNamesAreRememberedLastListWins(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		st := openTest(t, testOptions(t, driver))
		ctx := context.Background()
		if names, err := st.MCPTools.RememberedTools(ctx, "tracker"); err != nil || names != nil {
			t.Fatalf("a server never listed: %v %v", names, err)
		}
		for _, list := range [][]string{{"echo", "search"}, {"search"}, {}} {
			if err := st.MCPTools.RememberTools(ctx, "tracker", list); err != nil {
				t.Fatal(err)
			}
			if got, err := st.MCPTools.RememberedTools(ctx, "tracker"); err != nil || !slices.Equal(got, list) {
				t.Fatalf("remembered %v, %v; want the last list %v", got, err, list)
			}
		}
	})
}
