package telegram

import "relaybot/adapters/markdown"

// Entity is a Telegram message entity; Offset and Length count UTF-16 code units.
type Entity = markdown.Entity

// Render turns the model's Markdown into plain text and Telegram entities (see
// markdown.Telegram), so nothing ever needs MarkdownV2 escaping.
func Render(md string) (string, []Entity) {
	return markdown.Telegram(md)
}
