"use strict";
(function () {
  const log = document.getElementById("log");
  const form = document.getElementById("composer");
  const input = document.getElementById("text");
  const status = document.getElementById("status");
  const errorBox = document.getElementById("error");
  const hint = document.getElementById("hint");
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  let typingTimer = null;

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = !text;
  }

  function setTyping(ms) {
    clearTimeout(typingTimer);
    status.hidden = ms <= 0;
    if (ms > 0) {
      typingTimer = setTimeout(function () { status.hidden = true; }, ms);
    }
  }

  function upsert(m) {
    const stick = nearBottom();
    if (hint) hint.hidden = true;
    let el = document.getElementById("msg-" + m.id);
    if (!el) {
      el = document.createElement("article");
      el.id = "msg-" + m.id;
      el.className = "msg " + m.role;
      el.dataset.role = m.role;
      const body = document.createElement("div");
      body.className = "body";
      el.appendChild(body);
      log.appendChild(el);
    }
    const body = el.querySelector(".body");
    if (m.html) {
      // The server renders the bot's Markdown and sanitises it (bluemonday's UGC policy).
      body.innerHTML = m.html;
      body.classList.add("md");
    } else {
      body.textContent = m.text;
    }
    let stop = el.querySelector(".stop");
    if (m.stop && !stop) {
      // The answer still streams: its Stop button sends /stop, like typing it.
      stop = document.createElement("button");
      stop.type = "button";
      stop.className = "stop";
      stop.textContent = "Stop";
      stop.addEventListener("click", function () { stop.disabled = true; post("/stop"); });
      el.appendChild(stop);
    } else if (!m.stop && stop) {
      stop.remove();
    }
    el.querySelectorAll(".file").forEach(function (f) { f.remove(); });
    (m.files || []).forEach(function (f) {
      let node;
      if (f.image) {
        node = document.createElement("img");
        node.src = f.url;
        node.alt = f.name;
      } else {
        node = document.createElement("a");
        node.href = f.url;
        node.textContent = "📎 " + f.name;
        node.setAttribute("download", f.name);
      }
      node.className = "file";
      el.appendChild(node);
    });
    if (m.role === "bot") setTyping(0);
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  }

  const events = new EventSource("/chat/events");
  events.addEventListener("msg", function (e) { upsert(JSON.parse(e.data)); });
  events.addEventListener("typing", function (e) { setTyping(JSON.parse(e.data).ms); });
  events.addEventListener("open", function () { showError(""); });
  events.addEventListener("error", function () {
    if (events.readyState !== EventSource.OPEN) showError("Connection lost; reconnecting…");
  });

  function post(text) {
    return fetch("/chat/send", {
      method: "POST",
      headers: { "X-CSRF-Token": csrf },
      body: new URLSearchParams({ text: text, csrf: csrf }),
      credentials: "same-origin",
    });
  }

  function send() {
    const text = input.value.trim();
    if (!text) return;
    input.disabled = true;
    post(text).then(function (resp) {
      if (resp.ok) {
        input.value = "";
        showError("");
        autosize();
        return;
      }
      return resp.text().then(function (t) { showError(t.trim() || resp.statusText); });
    }).catch(function (err) {
      showError("Could not send: " + err);
    }).finally(function () {
      input.disabled = false;
      input.focus();
    });
  }

  function autosize() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, 200) + "px";
  }

  form.addEventListener("submit", function (e) { e.preventDefault(); send(); });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  input.addEventListener("input", autosize);
  input.focus();
})();
