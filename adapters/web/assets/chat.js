"use strict";
(function () {
  const log = document.getElementById("log");
  const form = document.getElementById("composer");
  const input = document.getElementById("text");
  const status = document.getElementById("status");
  const errorBox = document.getElementById("error");
  const hint = document.getElementById("hint");
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const fileInput = document.getElementById("file");
  const picked = document.getElementById("picked");
  const mic = document.getElementById("mic");
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
    place(el, m.pos);
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
      // The answer still streams: its Stop button stops it, a control rather than a message.
      stop = document.createElement("button");
      stop.type = "button";
      stop.className = "stop";
      stop.textContent = "Stop";
      stop.addEventListener("click", function () { stop.disabled = true; stopAnswer(stop); });
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
      } else if (f.audio) {
        // A spoken answer: played in the page, after the text it speaks.
        node = document.createElement("audio");
        node.controls = true;
        node.preload = "metadata";
        node.src = f.url;
        node.title = f.name;
      } else {
        node = document.createElement("a");
        node.href = f.url;
        node.textContent = "📎 " + f.name;
        node.setAttribute("download", f.name);
      }
      node.className = "file";
      el.appendChild(node);
    });
    el.querySelectorAll(".choices").forEach(function (c) { c.remove(); });
    if (m.question && m.choices && m.choices.length) {
      const bar = document.createElement("div");
      bar.className = "choices";
      m.choices.forEach(function (ch) {
        if (ch.url && /^https?:\/\//i.test(ch.url)) {
          // A link the user opens; it never answers the question.
          const a = document.createElement("a");
          a.href = ch.url;
          a.target = "_blank";
          a.rel = "noopener noreferrer";
          a.className = "link";
          a.textContent = ch.label;
          bar.appendChild(a);
          return;
        }
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = ch.label;
        b.dataset.choice = ch.id;
        b.addEventListener("click", function () { answer(m.question, ch.id, bar); });
        bar.appendChild(b);
      });
      el.appendChild(bar);
    }
    let qf = el.querySelector(".qform");
    if (m.question && m.form && m.form.length) {
      // An open form keeps what the user typed when its message is sent again.
      if (!qf || qf.dataset.question !== m.question) {
        if (qf) qf.remove();
        el.appendChild(buildForm(m.question, m.form));
      }
    } else if (qf) {
      qf.remove();
    }
    if (m.role === "bot") setTyping(0);
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  }

  // place keeps the messages in the order of their pos: a question goes above the answer it
  // holds up, which was already streaming when it was asked.
  function place(el, pos) {
    if (!pos || el.dataset.pos === String(pos)) return;
    el.dataset.pos = String(pos);
    const next = Array.from(log.querySelectorAll("article.msg")).find(function (o) {
      return o !== el && Number(o.dataset.pos) > pos;
    });
    if (next) log.insertBefore(el, next);
    else if (el.nextElementSibling) log.appendChild(el);
  }

  // buildForm renders a tool's form: an input per field (the schema's bounds as the input's
  // constraints), Submit and Decline. The server checks the values again.
  function buildForm(question, fields) {
    const f = document.createElement("form");
    f.className = "qform";
    f.dataset.question = question;
    fields.forEach(function (fd, i) {
      const id = "q-" + question + "-" + i;
      const row = document.createElement("div");
      row.className = "field";
      const label = document.createElement("label");
      label.htmlFor = id;
      label.textContent = fd.label + (fd.required ? " *" : "");
      row.appendChild(label);
      let inp;
      const dflt = fd.default || [];
      if (fd.kind === "multi") {
        // A multi-select: a checkbox per option, the default's options ticked; submitted as
        // one value, the chosen IDs as a JSON array.
        inp = document.createElement("fieldset");
        inp.className = "multi";
        inp.dataset.multi = "v." + fd.name;
        (fd.options || []).forEach(function (o, j) {
          const l = document.createElement("label");
          const cb = document.createElement("input");
          cb.type = "checkbox";
          cb.value = o.id;
          cb.id = id + "-" + j;
          cb.checked = dflt.indexOf(o.id) >= 0;
          l.appendChild(cb);
          l.appendChild(document.createTextNode(" " + o.label));
          inp.appendChild(l);
        });
        inp.id = id;
        row.appendChild(inp);
      } else if (fd.kind === "enum" || fd.kind === "boolean") {
        inp = document.createElement("select");
        const opts = fd.kind === "boolean" ? [{ id: "yes", label: "Yes" }, { id: "no", label: "No" }] : (fd.options || []);
        const none = document.createElement("option");
        none.value = "";
        none.textContent = "—";
        inp.appendChild(none);
        opts.forEach(function (o) {
          const op = document.createElement("option");
          op.value = o.id;
          op.textContent = o.label;
          inp.appendChild(op);
        });
      } else {
        inp = document.createElement("input");
        if (fd.kind === "number" || fd.kind === "integer") {
          inp.type = "number";
          inp.step = fd.kind === "integer" ? "1" : "any";
          if (fd.min != null) inp.min = String(fd.min);
          if (fd.max != null) inp.max = String(fd.max);
        } else {
          inp.type = { email: "email", uri: "url", date: "date" }[fd.format] || "text";
          if (fd.minlength) inp.minLength = fd.minlength;
          if (fd.maxlength) inp.maxLength = fd.maxlength;
        }
      }
      if (fd.kind !== "multi") {
        inp.id = id;
        inp.name = "v." + fd.name;
        inp.required = !!fd.required;
        if (dflt.length) inp.value = dflt[0];
        row.appendChild(inp);
      }
      if (fd.description) {
        const d = document.createElement("small");
        d.textContent = fd.description;
        row.appendChild(d);
      }
      f.appendChild(row);
    });
    const bar = document.createElement("div");
    bar.className = "formbar";
    const submit = document.createElement("button");
    submit.type = "submit";
    submit.textContent = "Submit";
    submit.dataset.choice = "submit";
    const decline = document.createElement("button");
    decline.type = "button";
    decline.textContent = "Decline";
    decline.dataset.choice = "decline";
    bar.appendChild(submit);
    bar.appendChild(decline);
    f.appendChild(bar);
    f.addEventListener("submit", function (e) {
      e.preventDefault();
      const values = {};
      f.querySelectorAll("input[name], select").forEach(function (inp) { values[inp.name] = inp.value; });
      f.querySelectorAll("fieldset.multi").forEach(function (fs) {
        const ids = [];
        fs.querySelectorAll("input[type=checkbox]").forEach(function (cb) { if (cb.checked) ids.push(cb.value); });
        values[fs.dataset.multi] = ids.length ? JSON.stringify(ids) : "";
      });
      answer(question, "submit", f, values);
    });
    decline.addEventListener("click", function () { answer(question, "decline", f, {}); });
    return f;
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

  // stopAnswer presses Stop: the server stops the answer without a message of the user's.
  function stopAnswer(button) {
    fetch("/chat/stop", {
      method: "POST",
      headers: { "X-CSRF-Token": csrf },
      body: new URLSearchParams({ csrf: csrf }),
      credentials: "same-origin",
    }).then(function (resp) {
      if (resp.ok) return;
      button.disabled = false;
      return resp.text().then(function (t) { showError(t.trim() || resp.statusText); });
    }).catch(function (err) {
      button.disabled = false;
      showError("Could not stop: " + err);
    });
  }

  // postFiles sends text with files as a multipart form: the file picker's files, or one
  // recording from the microphone (voice set, with its length).
  function postFiles(text, files, voice, durationMs) {
    const body = new FormData();
    body.append("text", text);
    body.append("csrf", csrf);
    files.forEach(function (f) { body.append("file", f, f.name); });
    if (voice) {
      body.append("voice", "1");
      body.append("duration_ms", String(Math.round(durationMs)));
    }
    return fetch("/chat/send", {
      method: "POST",
      headers: { "X-CSRF-Token": csrf },
      body: body,
      credentials: "same-origin",
    });
  }

  function showPicked() {
    const names = Array.from(fileInput.files).map(function (f) { return f.name; });
    picked.textContent = names.length ? "📎 " + names.join(", ") : "";
    picked.hidden = !names.length;
  }
  fileInput.addEventListener("change", showPicked);

  function send() {
    const text = input.value.trim();
    const files = Array.from(fileInput.files);
    if (!text && !files.length) return;
    input.disabled = true;
    (files.length ? postFiles(text, files, false, 0) : post(text)).then(function (resp) {
      if (resp.ok) {
        input.value = "";
        fileInput.value = "";
        showPicked();
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

  // answer sends a press of an approval question's button, or a form's values; the server
  // updates the message.
  function answer(question, choice, bar, values) {
    bar.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    const body = new URLSearchParams(values || {});
    body.set("q", question);
    body.set("choice", choice);
    body.set("csrf", csrf);
    fetch("/chat/answer", {
      method: "POST",
      headers: { "X-CSRF-Token": csrf },
      body: body,
      credentials: "same-origin",
    }).then(function (resp) {
      if (resp.ok) return;
      bar.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      return resp.text().then(function (t) { showError(t.trim() || resp.statusText); });
    }).catch(function (err) {
      bar.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      showError("Could not answer: " + err);
    });
  }

  function autosize() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, 200) + "px";
  }

  // Earlier conversations of this browser (those /reset closed), read-only.
  const earlier = document.getElementById("earlier");
  const earlierList = document.getElementById("earlier-list");
  const earlierView = document.getElementById("earlier-view");

  function showTranscript(id) {
    fetch("/chat/conversations/" + id, { credentials: "same-origin" }).then(function (resp) {
      if (!resp.ok) throw new Error(resp.statusText);
      return resp.json();
    }).then(function (msgs) {
      earlierView.replaceChildren();
      msgs.forEach(function (m) {
        const el = document.createElement("article");
        el.className = "msg " + m.role;
        const body = document.createElement("div");
        body.className = "body";
        if (m.html) {
          body.innerHTML = m.html; // rendered and sanitised by the server, as live messages
          body.classList.add("md");
        } else {
          body.textContent = m.text;
        }
        el.appendChild(body);
        earlierView.appendChild(el);
      });
    }).catch(function (err) { showError("Could not read the conversation: " + err.message); });
  }

  earlier.addEventListener("toggle", function () {
    if (!earlier.open) return;
    fetch("/chat/conversations", { credentials: "same-origin" }).then(function (resp) {
      if (!resp.ok) throw new Error(resp.statusText);
      return resp.json();
    }).then(function (list) {
      earlierList.replaceChildren();
      list.filter(function (c) { return !c.active; }).forEach(function (c) {
        const li = document.createElement("li");
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = new Date(c.created_at).toLocaleString() + " · " + (c.preview || "(empty)") + " · " + c.turns + " turns";
        b.addEventListener("click", function () { showTranscript(c.id); });
        li.appendChild(b);
        earlierList.appendChild(li);
      });
      if (!earlierList.children.length) {
        const li = document.createElement("li");
        li.textContent = "None yet.";
        earlierList.appendChild(li);
      }
    }).catch(function (err) { showError("Could not list conversations: " + err.message); });
  });

  // The microphone button records with MediaRecorder (Opus in WebM or OGG, as the browser
  // makes it) and sends the recording as a voice message when pressed again.
  let recorder = null;
  let chunks = [];
  let started = 0;
  mic.addEventListener("click", function () {
    if (recorder && recorder.state === "recording") {
      recorder.stop();
      return;
    }
    if (!navigator.mediaDevices || !window.MediaRecorder) {
      showError("This browser cannot record audio here (it needs HTTPS and MediaRecorder).");
      return;
    }
    navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
      const type = ["audio/ogg;codecs=opus", "audio/webm;codecs=opus"].find(function (t) { return MediaRecorder.isTypeSupported(t); }) || "";
      recorder = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
      chunks = [];
      recorder.addEventListener("dataavailable", function (e) { if (e.data.size) chunks.push(e.data); });
      recorder.addEventListener("stop", function () {
        stream.getTracks().forEach(function (t) { t.stop(); });
        mic.classList.remove("recording");
        mic.setAttribute("aria-pressed", "false");
        const mime = (recorder.mimeType || "audio/webm").split(";")[0];
        const ext = mime === "audio/ogg" ? "ogg" : "webm";
        const file = new File(chunks, "voice." + ext, { type: mime });
        postFiles("", [file], true, Date.now() - started).then(function (resp) {
          if (!resp.ok) return resp.text().then(function (t) { showError(t.trim() || resp.statusText); });
          showError("");
        }).catch(function (err) { showError("Could not send the recording: " + err); });
      });
      started = Date.now();
      recorder.start();
      mic.classList.add("recording");
      mic.setAttribute("aria-pressed", "true");
    }).catch(function (err) { showError("No microphone: " + err.message); });
  });

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
