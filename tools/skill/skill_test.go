package skill_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"relaybot/internal/testkit/logbuf"
	"relaybot/tools"
	"relaybot/tools/skill"
)

func load(t *testing.T, dirs ...string) (*skill.Loader, string) {
	t.Helper()
	var logs logbuf.Buffer
	l, err := skill.NewLoader(skill.Options{Dirs: dirs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l, logs.String()
}

func TestLoadFixtures(t *testing.T) {
	l, logs := load(t, "testdata/skills", "testdata/more")
	var names []string
	for _, s := range l.Skills() {
		names = append(names, s.Name+"="+s.Description)
	}
	want := []string{
		"haiku=Write a haiku: three lines, 5-7-5 syllables.",
		"pdf-report=Build a PDF report from tabular data the user gives.",
		"weather=Answer weather questions with the forecast for a place.",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("skills:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	for _, tc := range []struct{ file, reason string }{
		{"skills/no-front/SKILL.md", "does not start with a --- front matter line"},
		{"skills/bad-name/SKILL.md", `name \"Bad Name\" must be lower-case`},
		{"skills/no-description/SKILL.md", "front matter has no description"},
		{"skills/unclosed/SKILL.md", "front matter is not closed"},
		{"more/weather/SKILL.md", "name already taken"},
	} {
		var line string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, filepath.Join("testdata", tc.file)) {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, "level=WARN") || !strings.Contains(line, tc.reason) {
			t.Errorf("no warning naming %s with %q; logs:\n%s", tc.file, tc.reason, logs)
		}
	}
	if strings.Contains(logs, "notes") {
		t.Errorf("a folder without SKILL.md was warned about:\n%s", logs)
	}
}

func TestPrompt(t *testing.T) {
	l, _ := load(t, "testdata/skills")
	p := l.Prompt()
	for _, w := range []string{
		"call the activate_skill tool",
		"- pdf-report: Build a PDF report from tabular data the user gives.\n",
		"- weather: Answer weather questions with the forecast for a place.\n",
	} {
		if !strings.Contains(p, w) {
			t.Errorf("prompt lacks %q:\n%s", w, p)
		}
	}
	empty, _ := load(t)
	if empty.Prompt() != "" || len(empty.Tools(context.Background())) != 0 {
		t.Errorf("no skills, yet prompt %q and tools %v", empty.Prompt(), empty.Tools(context.Background()))
	}
}

func TestActivate(t *testing.T) {
	l, _ := load(t, "testdata/skills", "testdata/more")
	specs := l.Tools(context.Background())
	if len(specs) != 1 || specs[0].Name != skill.ToolName {
		t.Fatalf("tools %v", specs)
	}
	var schema struct {
		Properties struct {
			Name struct {
				Enum []string `json:"enum"`
			} `json:"name"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(specs[0].Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(schema.Properties.Name.Enum, ","); got != "haiku,pdf-report,weather" {
		t.Fatalf("schema enum %s", got)
	}
	tests := []struct {
		name    string
		args    string
		want    []string
		reject  []string
		wantErr string
	}{
		{"with files", `{"name":"pdf-report"}`,
			[]string{"Skill pdf-report is active", "# PDF report\n\n1. Ask for the data", "Further files of this skill:\n- reference.md\n- scripts/build.py"},
			[]string{"SKILL.md", ".cache", "name: pdf-report", "license"}, ""},
		{"without files, CRLF file", `{"name":"weather"}`,
			[]string{"Give the forecast in Celsius unless asked otherwise."}, []string{"Further files", "\r"}, ""},
		{"first of two same-named skills wins", `{"name":"weather"}`, nil, []string{"Never used"}, ""},
		{"unknown skill", `{"name":"nope"}`, nil, nil, `no skill named "nope" (skills: haiku, pdf-report, weather)`},
		{"missing name", `{}`, nil, nil, "the argument name is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Call(context.Background(), tools.Invocation{Name: skill.ToolName, Arguments: json.RawMessage(tc.args)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("result lacks %q:\n%s", w, res.Text)
				}
			}
			for _, r := range tc.reject {
				if strings.Contains(res.Text, r) {
					t.Errorf("result has %q:\n%s", r, res.Text)
				}
			}
		})
	}
	if _, err := l.Call(context.Background(), tools.Invocation{Name: "other", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("other tool: err %v, want ErrNotFound", err)
	}
}

func TestMissingDir(t *testing.T) {
	_, err := skill.NewLoader(skill.Options{Dirs: []string{"testdata/absent"}})
	if err == nil || !strings.Contains(err.Error(), "testdata/absent") {
		t.Fatalf("err %v", err)
	}
}
