package telegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The offset file is a journal of what long polling must not lose across a crash.
//
// Telegram forgets an update as soon as getUpdates is called with a higher offset, and returns
// at most 100 updates a call, so the offset sent to the server cannot wait for slow turns (with
// 100 turns in flight polling would stall). Instead the adapter keeps every update it takes in
// this file, before the next getUpdates confirms it to the server, until the handler has
// finished with it. A run that starts after a crash hands the unfinished updates over again,
// marked Redelivered, before it polls; updates the handler finished are never handed over twice.
//
// One record a line, appended:
//
//	relaybot-telegram-journal 1 <bot id>   the first line
//	offset <n>                             the next update to fetch
//	take <update id> <update as JSON>      an update handed to the handler
//	done <update id>                       the handler has finished with that update
//	again <update id> <n>                  an unfinished update handed over again, the nth time
//
// The file is rewritten (compacted) at start, at a clean stop and when finished records pile
// up. A file holding only a number (written by earlier versions) is read as the offset.
type journal struct {
	path    string
	botID   int64
	fileBot int64 // the bot the file was written for (its header), 0 before the header is read
	// foreignBot is the bot a file of another bot was written for, which was started over.
	foreignBot int64

	mu       sync.Mutex
	f        *os.File // open for appending between open and close
	offset   int64
	pending  map[int64]json.RawMessage
	again    map[int64]int // how many times a run handed a pending update over again
	appended int           // records appended since the file was last rewritten
}

const (
	journalMagic = "relaybot-telegram-journal"
	// compactAfter is how many appended records make a done record rewrite the file, when the
	// finished records outnumber the pending ones.
	compactAfter = 4096
)

// loadJournal reads the journal at path for the bot botID. A missing file is an empty journal.
// A journal of another bot (the token changed) is started over: its offset and updates mean
// nothing to this bot; dropped says how many unfinished updates were given up.
func loadJournal(path string, botID int64) (j *journal, dropped int, err error) {
	j = &journal{path: path, botID: botID, pending: map[int64]json.RawMessage{}, again: map[int64]int{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read offset file: %w", err)
	}
	lines := bytes.Split(data, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	for i, line := range lines {
		if err := j.apply(string(line), i == 0); err != nil {
			if i == len(lines)-1 {
				// A record cut short by a crash in the middle of a write: the update it was
				// taking is still on the server (the offset that confirms it was not sent).
				break
			}
			return nil, 0, fmt.Errorf("offset file %s, line %d: %w", path, i+1, err)
		}
	}
	if j.foreign() {
		fresh := &journal{path: path, botID: botID, foreignBot: j.fileBot, pending: map[int64]json.RawMessage{}, again: map[int64]int{}}
		return fresh, len(j.pending), nil
	}
	return j, 0, nil
}

// foreign reports whether the header named another bot.
func (j *journal) foreign() bool {
	return j.fileBot != 0 && j.fileBot != j.botID
}

// apply reads one record into the journal.
func (j *journal) apply(line string, first bool) error {
	word, rest, _ := strings.Cut(line, " ")
	switch word {
	case journalMagic:
		version, bot, _ := strings.Cut(rest, " ")
		if version != "1" {
			return fmt.Errorf("journal version %q is not 1", version)
		}
		id, err := strconv.ParseInt(bot, 10, 64)
		if err != nil {
			return fmt.Errorf("bad bot id %q", bot)
		}
		j.fileBot = id
	case "offset":
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad offset %q", rest)
		}
		j.offset = max(j.offset, n)
	case "take":
		idText, raw, _ := strings.Cut(rest, " ")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || !json.Valid([]byte(raw)) {
			return fmt.Errorf("bad take record %.60q", line)
		}
		j.pending[id] = json.RawMessage(raw)
	case "done":
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return fmt.Errorf("bad done record %q", line)
		}
		delete(j.pending, id)
		delete(j.again, id)
	case "again":
		idText, nText, _ := strings.Cut(rest, " ")
		id, err := strconv.ParseInt(idText, 10, 64)
		n, nerr := strconv.Atoi(nText)
		if err != nil || nerr != nil || n < 1 {
			return fmt.Errorf("bad again record %q", line)
		}
		j.again[id] = n
	default:
		n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if !first || err != nil || n < 0 {
			return fmt.Errorf("%.60q is not a journal record", line)
		}
		j.offset = n // the plain offset of earlier versions
	}
	return nil
}

// unfinished returns the ids of the updates taken but not finished, oldest first, and the
// updates by id.
func (j *journal) unfinished() ([]int64, map[int64]json.RawMessage) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ids := make([]int64, 0, len(j.pending))
	raws := make(map[int64]json.RawMessage, len(j.pending))
	for id, raw := range j.pending {
		ids = append(ids, id)
		raws[id] = raw
	}
	slices.Sort(ids)
	return ids, raws
}

// open rewrites the file compactly and keeps it open for appending.
func (j *journal) open() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("offset file folder: %w", err)
	}
	return j.rewriteLocked()
}

// rewriteLocked writes the header, the offset and the pending updates to a new file that
// replaces the journal, and reopens it for appending.
func (j *journal) rewriteLocked() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s 1 %d\noffset %d\n", journalMagic, j.botID, j.offset)
	ids := make([]int64, 0, len(j.pending))
	for id := range j.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "take %d %s\n", id, j.pending[id])
		if n := j.again[id]; n > 0 {
			fmt.Fprintf(&b, "again %d %d\n", id, n)
		}
	}
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write offset file: %w", err)
	}
	// 0600 whatever the umask, and also when an earlier run left the .tmp file with a wider
	// mode (O_CREATE keeps an existing file's mode): the file holds users' messages.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(b.Bytes())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write offset file: %w", err)
	}
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open offset file: %w", err)
	}
	j.appended = 0
	return nil
}

// take records updates about to be handed to the handler, and the offset after them, on disk
// (synced) before the server is told they were received.
func (j *journal) take(ids []int64, raws []json.RawMessage, offset int64) error {
	var b bytes.Buffer
	compact := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		var c bytes.Buffer // one line per record
		if err := json.Compact(&c, raws[i]); err != nil {
			return fmt.Errorf("update %d: %w", id, err)
		}
		compact[i] = c.Bytes()
		fmt.Fprintf(&b, "take %d %s\n", id, compact[i])
	}
	if offset > 0 {
		fmt.Fprintf(&b, "offset %d\n", offset)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, id := range ids {
		j.pending[id] = compact[i]
	}
	j.offset = max(j.offset, offset)
	if j.f == nil {
		return errors.New("offset file is not open")
	}
	if _, err := j.f.Write(b.Bytes()); err != nil {
		return fmt.Errorf("append to offset file: %w", err)
	}
	j.appended += len(ids)
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync offset file: %w", err)
	}
	return nil
}

// handOver records (synced) that update id is handed over again, and returns how many times
// it has been, at least atLeast (a count known elsewhere: the shared ledger's adoptions): a run
// that dies of the update before it finishes leaves the count for the next.
func (j *journal) handOver(id int64, atLeast int) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.again[id] = max(j.again[id]+1, atLeast)
	n := j.again[id]
	if j.f == nil {
		return n, errors.New("offset file is not open")
	}
	if _, err := fmt.Fprintf(j.f, "again %d %d\n", id, n); err != nil {
		return n, fmt.Errorf("append to offset file: %w", err)
	}
	j.appended++
	if err := j.f.Sync(); err != nil {
		return n, fmt.Errorf("sync offset file: %w", err)
	}
	return n, nil
}

// done records that the handler has finished with update id. It is not synced: losing it to a
// power cut only hands the update over again, which the handler recognises as Redelivered.
func (j *journal) done(id int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.pending[id]; !ok {
		return nil
	}
	delete(j.pending, id)
	delete(j.again, id)
	if j.f == nil {
		return errors.New("offset file is not open")
	}
	if _, err := j.f.WriteString("done " + strconv.FormatInt(id, 10) + "\n"); err != nil {
		return fmt.Errorf("append to offset file: %w", err)
	}
	j.appended++
	if j.appended > compactAfter && j.appended > 4*len(j.pending) {
		return j.rewriteLocked()
	}
	return nil
}

// close rewrites the file compactly (at a clean stop: the offset and nothing pending) and
// closes it.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.rewriteLocked()
	if j.f != nil {
		if cerr := j.f.Close(); err == nil {
			err = cerr
		}
		j.f = nil
	}
	return err
}

// DropOffsetOfNewDatabase removes the offset file when the SQLite database it belongs with does
// not exist yet. An offset file belongs to its database: a new database (a fresh start) must not
// skip updates, or hand over turns, that the file's earlier database (perhaps of another
// Telegram server) knew of. Call it before the database is opened. With PostgreSQL (dbPath "")
// or without an offset file it does nothing.
func DropOffsetOfNewDatabase(dbPath, offsetFile string, log *slog.Logger) error {
	if dbPath == "" || offsetFile == "" {
		return nil
	}
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	err := os.Remove(offsetFile)
	switch {
	case err == nil:
		log.Warn("telegram offset file removed: it belonged to an earlier database", "file", offsetFile, "database", dbPath)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("telegram.offset_file: removing the file of an earlier database: %w", err)
	}
	return nil
}
