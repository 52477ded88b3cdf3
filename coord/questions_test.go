package coord

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/internal/testkit/wait"
)

// asker is the settle side of one question: Ann's presses are accepted, anyone else's refused.
type asker struct {
	mu      sync.Mutex
	presses []adapters.Press
}

func (a *asker) settle(p adapters.Press) adapters.Verdict {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.presses = append(a.presses, p)
	if p.Answer.UserID != "ann" {
		return adapters.Verdict{Text: "Only Ann may answer."}
	}
	return adapters.Verdict{Accepted: true, Text: "Approved by Ann"}
}

func (a *asker) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.presses)
}

// joinMember joins db as a replica until the test ends.
func joinMember(t testing.TB, db *sql.DB) *Member {
	t.Helper()
	m, err := Join(context.Background(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
	return m
}

// listenQuestions runs q's listener until the test ends.
func listenQuestions(t testing.TB, q *Questions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Listen(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestAPressOnAnotherReplicaIsSettledByTheAsker carries presses of a question asked on one
// replica from another one, as a webhook behind a load balancer does: a bystander's press is
// refused with the asker's reason, Ann's accepted (once, by the asker's rules), a press of a
// question that closed, that nobody asked, or whose replica was taken over is closed; and a
// press made while the asker's listener is down is still settled (read from the table) once it
// listens again. A taken-over replica's open question is closed by exactly one survivor.
func TestAPressOnAnotherReplicaIsSettledByTheAsker(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	ctx := context.Background()
	ma, mb := joinMember(t, db), joinMember(t, db)
	qa, qb := NewQuestions(db, ma, nil), NewQuestions(db, mb, nil)
	bot := BotOf(chat.Telegram, "token")
	ba, bb := qa.Book(bot), qb.Book(bot)
	listenQuestions(t, qb)
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "-100"}
	press := func(id, user string) (adapters.Verdict, error) {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return bb.Press(pctx, adapters.Press{Question: id, Choice: "approve", MessageID: "5", Answer: adapters.Answer{UserID: user}})
	}

	// The asker's listener is down when the first press is made: it is read from the table.
	var ask asker
	if err := ba.Open(ma.Stamp(ctx), adapters.BookedQuestion{ID: "q1", Chat: ref, Text: "Run echo?"}, ask.settle); err != nil {
		t.Fatal(err)
	}
	ba.Posted(ctx, "q1", "5")
	type result struct {
		v   adapters.Verdict
		err error
	}
	first := make(chan result, 1)
	go func() {
		v, err := press("q1", "bob")
		first <- result{v, err}
	}()
	listenQuestions(t, qa)
	r := <-first
	if r.err != nil || r.v.Accepted || r.v.Closed || r.v.Text != "Only Ann may answer." {
		t.Fatalf("bystander's press elsewhere: %+v, %v; want refused with the asker's reason", r.v, r.err)
	}
	v, err := press("q1", "ann")
	if err != nil || !v.Accepted || v.Text != "Approved by Ann" {
		t.Fatalf("Ann's press elsewhere: %+v, %v; want accepted with the decision", v, err)
	}
	if n := ask.count(); n != 2 {
		t.Fatalf("the asker decided %d presses, want 2 (each once)", n)
	}
	ba.Close(ctx, "q1", true)
	if v, err := press("q1", "ann"); err != nil || !v.Closed {
		t.Fatalf("press of an answered question: %+v, %v; want closed", v, err)
	}
	if v, err := press("nobody-asked", "ann"); err != nil || !v.Closed {
		t.Fatalf("press of a question nobody asked: %+v, %v; want closed", v, err)
	}

	// The asker is taken over with a question open: presses are closed, and one survivor
	// closes its message once.
	var ask2 asker
	if err := ba.Open(ma.Stamp(ctx), adapters.BookedQuestion{ID: "q2", Chat: ref, Text: "Run rm?"}, ask2.settle); err != nil {
		t.Fatal(err)
	}
	ba.Posted(ctx, "q2", "6")
	ma.stop()
	<-ma.done
	if _, err := db.ExecContext(ctx, `UPDATE instances SET expires_at = now() - interval '1 minute' WHERE id = $1`, ma.ID()); err != nil {
		t.Fatal(err)
	}
	if gone, err := TakeOver(ctx, db, mb.ID(), 0, st.Turns); err != nil || len(gone) != 1 {
		t.Fatalf("takeover: %v, %v", gone, err)
	}
	if v, err := press("q2", "ann"); err != nil || !v.Closed {
		t.Fatalf("press of a question whose replica was taken over: %+v, %v; want closed", v, err)
	}
	if n := ask2.count(); n != 0 {
		t.Fatalf("a replica taken over decided %d presses, want none", n)
	}
	closed, err := CloseGone(ctx, db, bot, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(closed) != 1 || closed[0].Message.ID != "6" || closed[0].Text != "Run rm?" || closed[0].Message.Chat != ref {
		t.Fatalf("questions closed after the takeover: %+v, want q2's message 6", closed)
	}
	if again, err := CloseGone(ctx, db, bot, 100); err != nil || len(again) != 0 {
		t.Fatalf("questions closed a second time: %+v, %v; want none", again, err)
	}
}

// closer records the questions an adapter is asked to close.
type closer struct {
	mu     sync.Mutex
	closed []string // "chat message: text"
}

func (c *closer) CloseQuestion(_ context.Context, ref chat.Ref, messageID, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = append(c.closed, ref.String()+" "+messageID+": "+text)
}

func (c *closer) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.closed...)
}

// TestASurvivorClosesTheQuestionsOfAReplicaTakenOver: a replica dies with a question open; once
// a survivor takes it over, its heartbeat has the bot's adapter edit the question's message to
// say it closed unanswered (its buttons go), once, and a press of it is closed.
func TestASurvivorClosesTheQuestionsOfAReplicaTakenOver(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	bot := BotOf(chat.Discord, "token")
	dying, survivor := newTestReplica(t, db, storeOf(st)), newTestReplica(t, db, storeOf(st))
	c := &closer{}
	survivor.AddQuestionCloser(bot, c)
	var ask asker
	ref := chat.Ref{Platform: chat.Discord, ChatID: "500"}
	book := dying.Questions(bot)
	if err := book.Open(dying.Stamp(ctx), adapters.BookedQuestion{ID: "q1", Chat: ref, Text: "Run echo?"}, ask.settle); err != nil {
		t.Fatal(err)
	}
	book.Posted(ctx, "q1", "77")
	dying.member.stop() // dies: no renewal from now on
	<-dying.member.done
	want := []string{"discord:500 77: Run echo?" + adapters.ClosedText}
	wait.For(t, "the survivor to close the dead replica's question", func() bool { return len(c.all()) > 0 })
	if err := survivor.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.all(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("the chat saw %q closed, want %q once", got, want)
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := NewQuestions(db, survivor.member, nil).Book(bot).Press(pctx, adapters.Press{Question: "q1", Choice: "approve", Answer: adapters.Answer{UserID: "ann"}})
	if err != nil || !v.Closed || ask.count() != 0 {
		t.Errorf("a press of the dead replica's question: %+v, %v, decided %d times; want closed, never decided", v, err, ask.count())
	}
}

// TestATypedAnswerOnAnotherReplicaReachesThePrompt: a reply prompt open on one replica takes a
// message another replica carries to it (from someone it accepts), refuses one from someone
// else, and once closed takes nothing; a message in a chat without a prompt elsewhere is not
// carried.
func TestATypedAnswerOnAnotherReplicaReachesThePrompt(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	asking, other := newTestReplica(t, db, storeOf(st)), newTestReplica(t, db, storeOf(st))
	listenQuestions(t, asking.asks)
	listenQuestions(t, other.asks)
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "7"}
	var mu sync.Mutex
	var took []string
	id, err := asking.OpenPrompt(asking.Stamp(ctx), ref, func(in adapters.Inbound) bool {
		mu.Lock()
		defer mu.Unlock()
		if in.UserID != "ann" {
			return false
		}
		took = append(took, in.Text)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the other replica to learn of the prompt", func() bool {
		other.asks.mu.Lock()
		defer other.asks.mu.Unlock()
		return other.asks.listening && len(other.asks.elsewhere[promptKey(ref)]) == 1
	})
	carry := func(in adapters.Inbound) bool {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		taken, err := other.CarryAnswer(cctx, in)
		if err != nil {
			t.Fatalf("carry %q: %v", in.Text, err)
		}
		return taken
	}
	if carry(adapters.Inbound{Chat: ref, UserID: "bob", Text: "12"}) {
		t.Error("the prompt took a stranger's message")
	}
	if !carry(adapters.Inbound{Chat: ref, UserID: "ann", Text: "33"}) {
		t.Error("Ann's answer on the other replica did not reach the prompt")
	}
	if carry(adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "8"}, UserID: "ann", Text: "hello"}) {
		t.Error("a message of another chat was taken by the prompt")
	}
	asking.ClosePrompt(ctx, id)
	wait.For(t, "the other replica to learn the prompt closed", func() bool {
		other.asks.mu.Lock()
		defer other.asks.mu.Unlock()
		return len(other.asks.elsewhere[promptKey(ref)]) == 0
	})
	if carry(adapters.Inbound{Chat: ref, UserID: "ann", Text: "34"}) {
		t.Error("a closed prompt took a message")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(took) != 1 || took[0] != "33" {
		t.Errorf("the prompt took %q, want Ann's one answer", took)
	}
}

// BenchmarkPressElsewhere measures a press that lands on a replica whose turn did not ask the
// question, from the press until its verdict is back: recorded, the asker woken, decided there
// (refused, so the question stays open for the next press) and the verdict read back; and a
// press of a question no live turn holds (closed at once, one statement).
func BenchmarkPressElsewhere(b *testing.B) {
	st, _ := pgStore(b, "")
	db := pool(b, st)
	ctx := context.Background()
	ma, mb := joinMember(b, db), joinMember(b, db)
	qa, qb := NewQuestions(db, ma, nil), NewQuestions(db, mb, nil)
	listenQuestions(b, qa)
	listenQuestions(b, qb)
	bot := BotOf(chat.Telegram, "token")
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "-100"}
	var ask asker
	if err := qa.Book(bot).Open(ma.Stamp(ctx), adapters.BookedQuestion{ID: "q1", Chat: ref, Text: "Run echo?"}, ask.settle); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, question string }{{"carried to the asker", "q1"}, {"no such question", "q0"}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				v, err := qb.Book(bot).Press(ctx, adapters.Press{Question: bc.question, Choice: "approve", Answer: adapters.Answer{UserID: "bob"}})
				if err != nil || v.Accepted {
					b.Fatalf("press: %+v, %v", v, err)
				}
			}
		})
	}
}
