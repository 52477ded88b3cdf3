package discord

import "relaybot/adapters"

// MessengerOf is a's messenger, for tests that send and edit without the delivery engine.
func MessengerOf(a *Adapter) adapters.Messenger { return a.messenger }
