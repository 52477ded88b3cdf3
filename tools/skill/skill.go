// Package skill loads Agent Skills: folders holding a SKILL.md whose front matter gives the
// skill's name and description and whose body holds its instructions, maybe with further files
// beside it. The names and descriptions go into the system prompt (Loader.Prompt); the model loads
// a skill's instructions with the activate_skill tool.
package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"relaybot/audit"
	"relaybot/tools"
)

// ToolName is the name of the tool that loads a skill.
const ToolName = "activate_skill"

// Limits on what is read.
const (
	maxSkillFileBytes = 256 << 10 // a SKILL.md larger than this is skipped
	maxListedFiles    = 100       // further files listed per skill
	maxNameLen        = 64
	maxDescriptionLen = 1024
)

// validName is the Agent Skills naming rule: lower-case letters, digits and single hyphens.
var validName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Options configures the skill loader.
type Options struct {
	// Dirs are folders holding one skill per subfolder.
	Dirs []string
	// Logger receives warnings about skipped skills; nil means slog.Default().
	Logger *slog.Logger
}

// Skill is one loaded skill.
type Skill struct {
	Name        string
	Description string
	// Instructions is the body of SKILL.md after the front matter.
	Instructions string
	// Dir is the skill's folder.
	Dir string
	// Files are the further files in the folder, relative to Dir, with '/' separators.
	Files []string
}

// Loader is the tools.Loader of the skills found in the configured folders.
type Loader struct {
	skills []Skill // sorted by name
	byName map[string]int
	spec   tools.Spec
}

// NewLoader reads the skills in opts.Dirs. A folder that cannot be read is an error; a malformed
// SKILL.md is skipped with a warning naming the file; of two skills with one name the first
// (in Dirs order, then folder order) is kept, with a warning.
func NewLoader(opts Options) (*Loader, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	l := &Loader{byName: make(map[string]int)}
	for _, dir := range opts.Dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("skill: reading skill folder: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			path := filepath.Join(dir, e.Name(), "SKILL.md")
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			s, err := readSkill(path)
			if err != nil {
				log.Warn("skill: skipping malformed skill", "file", path, "err", err)
				continue
			}
			if i, dup := l.byName[s.Name]; dup {
				log.Warn("skill: skipping skill with a name already taken", "file", path, "name", s.Name, "kept", filepath.Join(l.skills[i].Dir, "SKILL.md"))
				continue
			}
			l.byName[s.Name] = len(l.skills)
			l.skills = append(l.skills, s)
		}
	}
	sort.SliceStable(l.skills, func(i, j int) bool { return l.skills[i].Name < l.skills[j].Name })
	for i, s := range l.skills {
		l.byName[s.Name] = i
	}
	l.spec = l.activateSpec()
	return l, nil
}

// readSkill parses one SKILL.md and lists the files beside it.
func readSkill(path string) (Skill, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Skill{}, err
	}
	if info.Size() > maxSkillFileBytes {
		return Skill{}, fmt.Errorf("larger than %d bytes", maxSkillFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Skill{}, err
	}
	meta, body, err := splitFrontMatter(string(data))
	if err != nil {
		return Skill{}, err
	}
	dir := filepath.Dir(path)
	s := Skill{Name: meta["name"], Description: meta["description"], Instructions: strings.TrimSpace(body), Dir: dir}
	switch {
	case s.Name == "":
		return Skill{}, errors.New("front matter has no name")
	case len(s.Name) > maxNameLen || !validName.MatchString(s.Name):
		return Skill{}, fmt.Errorf("name %q must be lower-case letters, digits and hyphens, at most %d characters", s.Name, maxNameLen)
	case s.Name != filepath.Base(dir):
		return Skill{}, fmt.Errorf("name %q does not match its folder %q", s.Name, filepath.Base(dir))
	case s.Description == "":
		return Skill{}, errors.New("front matter has no description")
	case len(s.Description) > maxDescriptionLen:
		return Skill{}, fmt.Errorf("description longer than %d characters", maxDescriptionLen)
	case s.Instructions == "":
		return Skill{}, errors.New("no instructions after the front matter")
	}
	s.Files, err = listFiles(dir)
	if err != nil {
		return Skill{}, fmt.Errorf("listing its files: %w", err)
	}
	return s, nil
}

// splitFrontMatter separates "---\nkey: value\n...\n---\nbody". Values may be quoted; a key with
// an empty value or a block indicator (| or >) takes the indented lines below it.
func splitFrontMatter(text string) (map[string]string, string, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return nil, "", errors.New("does not start with a --- front matter line")
	}
	front, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		if f, found := strings.CutSuffix(rest, "\n---"); found {
			front, body = f, ""
		} else {
			return nil, "", errors.New("front matter is not closed by a --- line")
		}
	}
	meta := make(map[string]string)
	var key string
	var block []string
	folded := false
	flush := func() {
		if key != "" && block != nil {
			sep := "\n"
			if folded {
				sep = " "
			}
			meta[key] = strings.TrimSpace(strings.Join(block, sep))
		}
		key, block = "", nil
	}
	for n, line := range strings.Split(front, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if block != nil {
				block = append(block, strings.TrimSpace(line))
			}
			// Nested maps (metadata:) and lists under other keys are ignored.
			continue
		}
		flush()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, "", fmt.Errorf("front matter line %d is not key: value", n+2)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case v == "" || v == "|" || v == "|-" || v == ">" || v == ">-":
			key, block, folded = k, []string{}, v != "|" && v != "|-"
		default:
			uq, err := unquote(v)
			if err != nil {
				return nil, "", fmt.Errorf("front matter line %d: %w", n+2, err)
			}
			meta[k] = uq
		}
	}
	flush()
	return meta, body, nil
}

func unquote(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var s string
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return "", fmt.Errorf("bad quoted value %s", v)
		}
		return s, nil
	}
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'"), nil
	}
	if v[0] == '"' || v[0] == '\'' {
		return "", fmt.Errorf("unterminated quoted value %s", v)
	}
	return v, nil
}

// listFiles lists the files under dir other than SKILL.md, skipping hidden ones.
func listFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || p == filepath.Join(dir, "SKILL.md") {
			return nil
		}
		if len(files) == maxListedFiles {
			return fs.SkipAll
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}

// Skills returns the loaded skills, sorted by name.
func (l *Loader) Skills() []Skill { return slices.Clone(l.skills) }

// Prompt returns the text for the system prompt that lists the skills and tells the model how to
// load one; empty when there are none.
func (l *Loader) Prompt() string {
	if len(l.skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("You have skills: instructions for particular tasks. When a task matches a skill's description, call the ")
	b.WriteString(ToolName)
	b.WriteString(" tool with its name first and follow the instructions it returns.\n<available_skills>\n")
	for _, s := range l.skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Description)
	}
	b.WriteString("</available_skills>")
	return b.String()
}

// Source reports audit.SourceSkill.
func (l *Loader) Source() audit.Source { return audit.SourceSkill }

// Tools offers activate_skill when there is at least one skill.
func (l *Loader) Tools(ctx context.Context) []tools.Spec {
	if len(l.skills) == 0 {
		return nil
	}
	return []tools.Spec{l.spec}
}

// activateSpec describes activate_skill, its name argument limited to the loaded skills.
func (l *Loader) activateSpec() tools.Spec {
	names := make([]string, len(l.skills))
	for i, s := range l.skills {
		names[i] = s.Name
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "enum": names, "description": "The skill to load."},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	})
	return tools.Spec{
		Name:        ToolName,
		Description: "Load a skill's instructions by name; the skills are listed in the system prompt.",
		Parameters:  schema,
	}
}

// Call runs activate_skill: the result is the skill's instructions and the list of its further files.
func (l *Loader) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	if inv.Name != ToolName || len(l.skills) == 0 {
		return tools.Result{}, fmt.Errorf("skill: %s: %w", inv.Name, tools.ErrNotFound)
	}
	var a struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(inv.Arguments, &a); err != nil {
		return tools.Result{}, fmt.Errorf("activate_skill: bad arguments: %w", err)
	}
	if a.Name == "" {
		return tools.Result{}, errors.New("activate_skill: the argument name is required")
	}
	i, ok := l.byName[a.Name]
	if !ok {
		names := make([]string, len(l.skills))
		for j, s := range l.skills {
			names[j] = s.Name
		}
		return tools.Result{}, fmt.Errorf("activate_skill: no skill named %q (skills: %s)", a.Name, strings.Join(names, ", "))
	}
	s := l.skills[i]
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %s is active. Follow these instructions:\n\n%s", s.Name, s.Instructions)
	if len(s.Files) > 0 {
		b.WriteString("\n\nFurther files of this skill:\n")
		for _, f := range s.Files {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return tools.Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}
