"use strict";
// Starts this browser's chat: a same-origin POST sets the chat cookie, then the page reloads
// as the chat itself. Loading /chat alone (as another site's <img> could) starts nothing.
(function () {
  const errorBox = document.getElementById("error");
  fetch("/chat/session", { method: "POST", credentials: "same-origin" })
    .then(function (resp) {
      if (resp.ok) {
        location.reload();
        return;
      }
      return resp.text().then(function (t) { throw new Error(t.trim() || resp.statusText); });
    })
    .catch(function (err) {
      document.getElementById("starting").hidden = true;
      errorBox.textContent = "Could not start a chat: " + err.message;
      errorBox.hidden = false;
    });
})();
