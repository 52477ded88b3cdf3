package plugin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/tools"
	"relaybot/tools/plugin"
)

func echoTool(name string) plugin.Tool {
	return plugin.Tool{
		Spec: tools.Spec{Name: name, Description: "echoes its arguments", Parameters: []byte(`{"type":"object"}`)},
		Run: func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
			return tools.Result{Text: name + " " + string(inv.Arguments)}, nil
		},
	}
}

func init() {
	plugin.Register("test_echo", func(plugin.Deps) ([]plugin.Tool, error) {
		return []plugin.Tool{echoTool("echo"), echoTool("echo2")}, nil
	})
	plugin.Register("test_echo_again", func(plugin.Deps) ([]plugin.Tool, error) {
		return []plugin.Tool{echoTool("echo")}, nil
	})
	plugin.Register("test_broken", func(plugin.Deps) ([]plugin.Tool, error) {
		return nil, errors.New("no config")
	})
}

func TestNewLoader(t *testing.T) {
	tests := []struct {
		name    string
		enabled []string
		wantErr string
		specs   []string
	}{
		{"none", nil, "", nil},
		{"one plugin", []string{"test_echo"}, "", []string{"echo", "echo2"}},
		{"listed twice counts once", []string{"test_echo", "test_echo"}, "", []string{"echo", "echo2"}},
		{"unknown", []string{"test_echo", "nope"}, `unknown plugin "nope"`, nil},
		{"factory fails", []string{"test_broken"}, "plugin test_broken: no config", nil},
		{"tool offered twice", []string{"test_echo", "test_echo_again"}, "tool echo is already offered by plugin test_echo", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := plugin.NewLoader(tc.enabled, plugin.Deps{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range l.Tools(context.Background()) {
				names = append(names, s.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.specs, ",") {
				t.Fatalf("tools %v, want %v", names, tc.specs)
			}
		})
	}
}

func TestLoaderCall(t *testing.T) {
	l, err := plugin.NewLoader([]string{"test_echo"}, plugin.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Source() != audit.SourcePlugin {
		t.Fatalf("source %s", l.Source())
	}
	res, err := l.Call(context.Background(), tools.Invocation{Name: "echo2", Arguments: []byte(`{"a":1}`)})
	if err != nil || res.Text != `echo2 {"a":1}` {
		t.Fatalf("got %q, %v", res.Text, err)
	}
	_, err = l.Call(context.Background(), tools.Invocation{Name: "missing", Arguments: []byte(`{}`)})
	if !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
}

func TestRegister(t *testing.T) {
	names := plugin.Registered()
	if !strings.Contains(strings.Join(names, ","), "test_echo") {
		t.Fatalf("registered %v", names)
	}
	for _, tc := range []struct {
		name string
		f    plugin.Factory
	}{
		{"", func(plugin.Deps) ([]plugin.Tool, error) { return nil, nil }},
		{"test_nil", nil},
		{"test_echo", func(plugin.Deps) ([]plugin.Tool, error) { return nil, nil }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", tc.name)
				}
			}()
			plugin.Register(tc.name, tc.f)
		}()
	}
}
