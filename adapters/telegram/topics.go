package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/internal/ellipsis"
)

// maxTopicName is the longest forum topic name the Bot API takes, in characters.
const maxTopicName = 128

// newTopicName names a topic that /new opens without words of its own.
const newTopicName = "New conversation"

// topics opens a topic for each conversation in private chats (Options.PrivateTopics), where
// the bot has topics in private chats (Bot API 10.5: getMe's has_topics_enabled, which
// setMySettings turns on): a message in the main chat, or /new anywhere in the chat, opens a
// topic named from it (createForumTopic, one paced request), and the message is handed over in
// it, so the topic is its own conversation and the answer goes there. A message in a topic
// continues that topic's conversation. Where the bot cannot have topics, the chat is answered
// as before and the log says so once; a topic Telegram refuses for one message sends that
// answer to the chat, and the log says why.
type topics struct {
	a      *Adapter
	on     atomic.Bool
	warned sync.Once
	// untitled are the topics /new opened whose first question has not come yet: its answer
	// titles them.
	untitled sync.Map
}

// takeUntitled reports whether message in is the first question in a topic /new opened, and
// forgets the topic: only that question titles it.
func (t *topics) takeUntitled(in adapters.Inbound) bool {
	if in.Kind != adapters.Private || in.Chat.ThreadID == "" || in.Command != "" {
		return false
	}
	_, ok := t.untitled.LoadAndDelete(in.Chat.String())
	return ok
}

// getMeTopics is what getMe says of topics in private chats.
type getMeTopics struct {
	HasTopicsEnabled bool `json:"has_topics_enabled"`
}

// start finds whether the bot has topics in private chats, and turns them on with
// setMySettings when it does not; either failing leaves them off, said once in the log.
func (t *topics) start(ctx context.Context) {
	if !t.a.opts.PrivateTopics {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, commandsTimeout)
	defer cancel()
	var me getMeTopics
	if err := t.a.api.callInto(ctx, "getMe", tgbotapi.Params{}, &me); err != nil {
		t.off("cannot tell whether the bot has topics in private chats", err)
		return
	}
	if !me.HasTopicsEnabled {
		if err := t.a.api.callInto(ctx, "setMySettings", tgbotapi.Params{"has_topics_enabled": "true"}, nil); err != nil {
			t.off("the bot has no topics in private chats and cannot turn them on (BotFather: topics in private chats)", err)
			return
		}
		t.a.log.Info("telegram: topics in private chats turned on for the bot (setMySettings), for private_topics")
	}
	t.on.Store(true)
}

// off turns private topics off for the rest of the run and says why, once.
func (t *topics) off(why string, err error) {
	t.on.Store(false)
	t.warned.Do(func() {
		t.a.log.Warn("telegram: private_topics is on but "+why+"; answering in private chats as before", "err", err)
	})
}

// opens reports whether message in opens a topic of its own.
func (t *topics) opens(in adapters.Inbound) bool {
	if !t.on.Load() || in.Kind != adapters.Private {
		return false
	}
	return in.Command == "new" || in.Command == "" && in.Chat.ThreadID == ""
}

// topicName names the topic of message in: /new's words or newTopicName, else the first line of
// the question, else its sender's name.
func topicName(in adapters.Inbound) string {
	text := in.Text
	if in.Command == "new" {
		text = in.Args
		if strings.TrimSpace(text) == "" {
			return newTopicName
		}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		line = "Question from " + in.UserName
	}
	return ellipsis.Cut(line, maxTopicName)
}

// forumTopic is createForumTopic's answer, as much of it as the adapter reads.
type forumTopic struct {
	MessageThreadID int `json:"message_thread_id"`
}

// open opens message in's topic and returns in, handed over in it (OpensThread), and true;
// false, with in unchanged, when Telegram refused the topic.
func (t *topics) open(ctx context.Context, in adapters.Inbound) (adapters.Inbound, bool) {
	var ft forumTopic
	ref := in.Chat.Chat()
	err := t.a.engine.Do(ctx, delivery.Request{Chat: ref, Class: delivery.ClassMessage, Kind: delivery.EventSend,
		Run: func(ctx context.Context) error {
			return t.a.api.callInto(ctx, "createForumTopic", tgbotapi.Params{"chat_id": ref.ChatID, "name": topicName(in)}, &ft)
		}})
	if err == nil && ft.MessageThreadID == 0 {
		err = errors.New("telegram createForumTopic: answer without a message_thread_id")
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.desc), "not a forum") {
			t.off("Telegram says the bot has no topics in private chats", err)
		} else {
			t.a.log.Warn("telegram: could not open a topic for the conversation; answering in the chat", "chat", ref.ChatID, "err", err)
		}
		return in, false
	}
	in.Chat.ThreadID, in.OpensThread = strconv.Itoa(ft.MessageThreadID), true
	if in.TitlesThread = in.Command == ""; !in.TitlesThread {
		t.untitled.Store(in.Chat.String(), struct{}{})
	}
	t.a.log.Info("telegram: topic opened for a conversation", "chat", ref.ChatID, "topic", in.Chat.ThreadID)
	return in, true
}

// topicResponder answers a message that opened a topic, and titles the topic.
type topicResponder struct {
	askResponder
	t *topics
}

var _ adapters.ThreadTitler = topicResponder{}

// ThreadOpened is true: the topic is opened before the message is handed over, or the message
// is in a topic the bot opened.
func (r topicResponder) ThreadOpened() bool { return true }

// TitleThread renames the topic to title, cut to the Bot API's 128 characters
// (editForumTopic, one paced request).
func (r topicResponder) TitleThread(ctx context.Context, title string) error {
	title = ellipsis.Cut(strings.Join(strings.Fields(title), " "), maxTopicName)
	if title == "" {
		return errors.New("telegram: empty topic title")
	}
	ref := r.chat
	return r.t.a.engine.Do(ctx, delivery.Request{Chat: ref.Chat(), Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			return r.t.a.api.callInto(ctx, "editForumTopic",
				tgbotapi.Params{"chat_id": ref.ChatID, "message_thread_id": ref.ThreadID, "name": title}, nil)
		}})
}

// responderFor is the responder of message in: one that titles its topic when in opened one.
func (a *Adapter) responderFor(in adapters.Inbound) adapters.Responder {
	resp := askResponder{Responder: a.engine.Responder(in.Chat, adapters.SendOptions{ReplyTo: in.MessageID, Stoppable: true}, a.opts.Stream),
		a: a, chat: in.Chat}
	if in.OpensThread || in.TitlesThread {
		return topicResponder{askResponder: resp, t: &a.topics}
	}
	return resp
}
