// The env server's play page: the env's picture, one button per legal action (or an action form
// built from GET /schema), and a WebSocket to /ws. One tab = one WebSocket = one session of its
// own. Everything shown is set through the DOM (textContent, properties), except the picture:
// HTML the server made with its sanitizer (POST /web/view), under a CSP that runs no inline script.
"use strict";
(() => {
  const root = document.body.dataset.root || "";
  const $ = (id) => document.getElementById(id);
  const el = (tag, props = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === "class") node.className = v; else if (k in node) node[k] = v; else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : String(c));
    return node;
  };

  let schemaRoot = {};
  let fields = [];
  let ws = null;
  const pending = [];
  let steps = 0, ret = 0;
  let canRender = false, lastObs = null, done = false, viewSeq = 0, choices = null, formFolded = false;
  // True from an observation until the buttons for it arrive: until then the buttons and keys on
  // the page are the previous state's, and a press would be judged against them.
  let stale = false;

  // -- schema → form ------------------------------------------------------------------------
  function deref(s) {
    let guard = 0;
    while (s && typeof s === "object" && typeof s.$ref === "string" && guard++ < 32) {
      const path = s.$ref.replace(/^#\//, "").split("/");
      let target = schemaRoot;
      for (const p of path) target = target && target[p.replace(/~1/g, "/").replace(/~0/g, "~")];
      const { $ref, ...rest } = s;
      s = Object.assign({}, target || {}, rest);
    }
    return s || {};
  }
  function simplify(s) {
    s = deref(s);
    const alts = s.anyOf || s.oneOf;
    if (Array.isArray(alts)) {
      const real = alts.map(deref).filter((a) => a.type !== "null");
      if (real.length === 1) return Object.assign({}, real[0], { description: s.description || real[0].description, default: s.default, title: s.title || real[0].title, nullable: true });
    }
    return s;
  }
  function kindOf(s) {
    if (Array.isArray(s.enum)) return "enum";
    if (s.const !== undefined) return "const";
    if (["string", "integer", "number", "boolean"].includes(s.type)) return s.type;
    return "json";
  }
  function initial(s) {
    if (s.default !== undefined && s.default !== null) return s.default;
    if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
    if (s.const !== undefined) return s.const;
    if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
    if (s.type === "integer" || s.type === "number") return s.minimum !== undefined ? s.minimum : 0;
    if (s.type === "boolean") return false;
    if (s.type === "array") return [];
    if (s.type === "object") return {};
    return "";
  }
  function buildForm(actionSchema) {
    schemaRoot = actionSchema;
    const props = actionSchema.properties || {};
    const required = new Set(actionSchema.required || []);
    const box = $("fields");
    box.replaceChildren();
    fields = [];
    for (const [name, raw] of Object.entries(props)) {
      if (name === "metadata") continue;
      const s = simplify(raw);
      const kind = kindOf(s);
      const id = "field-" + name;
      let input;
      const start = initial(s);
      if (kind === "enum") {
        input = el("select", { id, name });
        s.enum.forEach((v, i) => input.append(el("option", { value: String(i) }, JSON.stringify(v))));
      } else if (kind === "boolean") {
        input = el("input", { id, name, type: "checkbox", checked: !!start });
      } else if (kind === "integer" || kind === "number") {
        input = el("input", { id, name, type: "number", step: kind === "integer" ? "1" : "any", value: String(start) });
        if (s.minimum !== undefined) input.min = s.minimum;
        if (s.maximum !== undefined) input.max = s.maximum;
      } else if (kind === "string") {
        input = s.maxLength === undefined || s.maxLength > 200
          ? el("textarea", { id, name, rows: 2, value: String(start) })
          : el("input", { id, name, type: "text", value: String(start) });
      } else if (kind === "const") {
        input = el("input", { id, name, type: "text", value: JSON.stringify(s.const), disabled: true });
      } else {
        input = el("textarea", { id, name, rows: 3, value: JSON.stringify(start, null, 1), spellcheck: false });
      }
      const label = el("label", { htmlFor: id }, name + (required.has(name) ? " *" : ""));
      const help = el("small", {}, [s.description, kind === "json" ? "(JSON)" : ""].filter(Boolean).join(" "));
      box.append(el("div", { class: "field" }, label, input, help));
      fields.push({ name, s, kind, input, required: required.has(name) });
    }
    if (!fields.length) box.append(el("p", { class: "muted" }, "This action has no fields."));
  }
  function formAction() {
    const action = {};
    for (const f of fields) {
      const v = f.input;
      if (f.kind === "enum") action[f.name] = f.s.enum[Number(v.value)];
      else if (f.kind === "boolean") action[f.name] = v.checked;
      else if (f.kind === "integer" || f.kind === "number") {
        if (v.value === "" && !f.required) continue;
        action[f.name] = f.kind === "integer" ? parseInt(v.value, 10) : parseFloat(v.value);
      } else if (f.kind === "string") {
        if (v.value === "" && !f.required && f.s.nullable) continue;
        action[f.name] = v.value;
      } else if (f.kind === "const") action[f.name] = f.s.const;
      else {
        try { action[f.name] = JSON.parse(v.value); } catch (e) { throw new Error(`${f.name}: not valid JSON (${e.message})`); }
      }
    }
    return action;
  }
  function currentAction() {
    if ($("json-mode").checked) {
      try { return JSON.parse($("action-json").value); } catch (e) { throw new Error("the action is not valid JSON: " + e.message); }
    }
    return formAction();
  }

  // -- observation → view -------------------------------------------------------------------
  const IMAGE_PREFIXES = { iVBORw0KGgo: "png", "/9j/": "jpeg", R0lGOD: "gif", UklGR: "webp" };
  function imageSrc(v) {
    if (typeof v !== "string" || v.length < 16) return null;
    const m = /^data:image\/(png|jpeg|gif|webp);base64,([A-Za-z0-9+/=\s]+)$/.exec(v);
    if (m) return v;
    if (!/^[A-Za-z0-9+/=\s]+$/.test(v)) return null;
    for (const [prefix, kind] of Object.entries(IMAGE_PREFIXES)) if (v.startsWith(prefix)) return `data:image/${kind};base64,${v}`;
    return null;
  }
  const isScalar = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);
  const num = (x) => (typeof x === "number" && isFinite(x) ? String(Number(x.toPrecision(10))) : JSON.stringify(x));
  function scalarText(v) { return typeof v === "string" ? v : num(v); }
  function view(v, depth = 0) {
    const src = imageSrc(v);
    if (src) return el("img", { class: "frame", src, alt: "image" });
    if (typeof v === "string") return v.includes("\n") || v.length > 80 ? el("pre", {}, v) : el("span", {}, v);
    if (isScalar(v)) return el("span", {}, scalarText(v));
    if (Array.isArray(v)) {
      if (v.length && v.every((r) => Array.isArray(r) && r.every(isScalar)) && v.length <= 64) {
        const t = el("table", { class: "grid" });
        for (const row of v) t.append(el("tr", {}, ...row.slice(0, 64).map((c) => el("td", {}, scalarText(c)))));
        return t;
      }
      if (v.length && v.every((r) => r && typeof r === "object" && !Array.isArray(r)) && v.length <= 200) {
        const keys = [...new Set(v.flatMap((r) => Object.keys(r)))].slice(0, 12);
        const t = el("table", {}, el("tr", {}, ...keys.map((k) => el("th", {}, k))));
        for (const row of v) t.append(el("tr", {}, ...keys.map((k) => el("td", {}, row[k] === undefined ? "" : view(row[k], depth + 1)))));
        return t;
      }
      if (v.every(isScalar)) {
        const shown = v.slice(0, 256).map(scalarText).join(", ");
        return el("span", {}, `[${shown}${v.length > 256 ? `, … ${v.length - 256} more` : ""}]`);
      }
      return el("pre", {}, JSON.stringify(v, null, 1));
    }
    if (v && typeof v === "object") {
      if (depth > 3) return el("pre", {}, JSON.stringify(v, null, 1));
      const entries = Object.entries(v);
      if (!entries.length) return el("span", { class: "muted" }, "{}");
      const t = el("table");
      for (const [k, x] of entries) t.append(el("tr", {}, el("th", {}, k), el("td", {}, view(x, depth + 1))));
      return t;
    }
    return el("span", {}, String(v));
  }
  function showObservation(data) {
    const obs = data.observation || {};
    $("observation").replaceChildren(view(obs));
    $("reward").textContent = data.reward === null || data.reward === undefined ? "–" : num(data.reward);
    $("done").textContent = String(!!data.done);
    $("steps").textContent = String(steps);
    $("return").textContent = num(ret);
    done = !!data.done;
    $("step").disabled = done;
    $("over").hidden = !done;
    setChoicesEnabled();
  }
  function setChoicesEnabled() {
    for (const b of $("choices").querySelectorAll("button")) b.disabled = done || stale;
  }

  // -- picture and buttons (POST /web/view: the server's sanitizer and action_choices) ------------
  const KEY_NAMES = { ArrowUp: "↑", ArrowDown: "↓", ArrowLeft: "←", ArrowRight: "→", " ": "space" };
  async function updateView(frame, keepError = false) {
    const seq = ++viewSeq, at = String(steps);
    let view;
    try {
      const r = await fetch(`${root}/web/view`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ frame, observation: lastObs }) });
      view = await r.json();
      if (!r.ok) throw new Error(view.detail || `HTTP ${r.status}`);
    } catch (e) {
      if (seq !== viewSeq) return;
      if (!keepError) showError("could not show the picture: " + e.message);
      stale = false;  // keep the old buttons usable rather than leave the page stuck
      setChoicesEnabled();
      return;
    }
    if (seq !== viewSeq) return;  // a newer observation is already on its way
    if (view.frame_html) {
      const box = $("frame");
      box.innerHTML = view.frame_html;  // sanitized by the server; the CSP is the second fence
      box.hidden = false;
    } else if (!canRender || frame === null) {
      $("frame").hidden = true;
    }
    stale = false;
    showChoices(view.choices);
    $("frame").dataset.steps = at;  // the picture and buttons now show the state after `at` steps
  }
  function showChoices(list) {
    choices = Array.isArray(list) ? list : null;
    const box = $("choices");
    box.replaceChildren();
    box.hidden = choices === null;
    $("keys-hint").hidden = !(choices && choices.some((c) => c.key));
    if (choices === null) { $("custom").open = true; return; }
    if (!formFolded) { $("custom").open = false; formFolded = true; }
    for (const c of choices) {
      const b = el("button", { type: "button", class: "choice", disabled: done || stale, title: JSON.stringify(c.action) }, c.label);
      if (c.key) b.append(el("kbd", {}, KEY_NAMES[c.key] || c.key));
      b.addEventListener("click", () => play(c.action));
      box.append(b);
    }
    if (!choices.length && !done) box.append(el("span", { class: "muted" }, "no legal action now"));
  }
  async function play(action) {
    if (done) return;
    showError("");
    try { await send("step", { type: "step", data: action }, { action }); } catch (e) { showError(e.message); }
  }
  const WASD = { w: "ArrowUp", a: "ArrowLeft", s: "ArrowDown", d: "ArrowRight" };
  document.addEventListener("keydown", (ev) => {
    if (!choices || stale || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
    let hit = choices.find((c) => c.key === ev.key);
    if (!hit && WASD[ev.key.toLowerCase()]) hit = choices.find((c) => c.key === WASD[ev.key.toLowerCase()]);
    if (!hit) return;
    ev.preventDefault();
    play(hit.action);
  });

  // -- the WebSocket ------------------------------------------------------------------------
  function setConn(text, cls) { const c = $("conn"); c.textContent = text; c.className = "badge " + (cls || ""); }
  function showError(msg) { $("error").textContent = msg || ""; }
  // The env's own words, without the server's internal addresses (a URL in brackets, a loopback host).
  const clean = (s) => String(s || "").replace(/\s*\[(?:https?|wss?):\/\/[^\]\s]*\]/g, "")
    .replace(/(?:https?|wss?):\/\/(?:127\.\d+\.\d+\.\d+|localhost|0\.0\.0\.0|\[::1?\])(?::\d+)?[^\s)\]]*/g, "the server");
  function errorText(d, kind) {
    const details = (d.errors || []).map((e) => `${(e.loc || []).filter((p) => p !== "data").join(".") || "action"}: ${e.msg}`).join("\n");
    const msg = clean(d.message);
    if (d.code === "EXECUTION_ERROR") return `The environment could not ${kind === "render" ? "draw itself" : kind || "do that"}: ${msg}`;
    if (d.code === "VALIDATION_ERROR") return `Not a valid ${kind === "reset" ? "reset" : "action"}: ${msg}${details ? "\n" + details : ""}`;
    if (d.code === "TIMEOUT") return `The environment took too long: ${msg}`;
    return `${d.code || "ERROR"}: ${msg}${details ? "\n" + details : ""}`;
  }
  function connect() {
    return new Promise((resolve, reject) => {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      const sock = new WebSocket(`${scheme}://${location.host}${root}/ws`);
      sock.onopen = () => { ws = sock; setConn("connected: a session of your own", "ok"); resolve(sock); };
      sock.onerror = () => reject(new Error("could not connect to the environment's WebSocket"));
      sock.onclose = (ev) => {
        if (ws === sock) ws = null;
        pending.length = 0;
        setConn("disconnected" + (ev.reason ? `: ${ev.reason}` : ""), "bad");
        $("step").disabled = true; $("state").disabled = true;
      };
      sock.onmessage = (ev) => onFrame(JSON.parse(ev.data));
    });
  }
  function onFrame(frame) {
    const req = pending.shift() || {};
    if (frame.type === "error") {
      showError(errorText(frame.data || {}, req.kind));
      if (req.kind === "render") updateView(null, true);  // no picture, but the buttons still
      return;
    }
    if (frame.type === "render") { updateView(frame.data || null); return; }
    showError("");
    if (frame.type === "observation") {
      const data = frame.data || {};
      if (req.kind === "reset") { steps = 0; ret = 0; $("history").replaceChildren(); }
      else { steps += 1; ret += Number(data.reward) || 0; }
      stale = true;  // until updateView brings this state's buttons
      showObservation(data);
      if (req.kind === "step") {
        $("history").append(el("li", {}, `${JSON.stringify(req.action)} → reward ${data.reward === null || data.reward === undefined ? "–" : num(data.reward)}${data.done ? ", done" : ""}`));
      }
      $("state").disabled = false;
      lastObs = data;
      if (canRender) send("render", { type: "render" }).catch((e) => showError(e.message));
      else updateView(null);
    } else if (frame.type === "state") {
      $("state-view").textContent = JSON.stringify(frame.data, null, 2);
      $("state-view").classList.remove("muted");
    }
  }
  async function send(kind, payload, extra = {}) {
    // Not before the env's metadata is read: whether it draws pictures (canRender) is decided when
    // the observation comes back, and a click before the page had read it got no picture.
    await loaded;
    if (!ws || ws.readyState !== WebSocket.OPEN) await connect();
    pending.push({ kind, ...extra });
    ws.send(JSON.stringify(payload));
  }

  // -- wiring -------------------------------------------------------------------------------
  async function load() {
    try {
      const [meta, schema] = await Promise.all([
        fetch(`${root}/metadata`).then((r) => r.json()),
        fetch(`${root}/schema`).then((r) => r.json()),
      ]);
      if (meta.name) $("env-name").textContent = meta.name;
      canRender = !!(meta.protocol && Array.isArray(meta.protocol.extensions) && meta.protocol.extensions.includes("render"));
      $("env-description").textContent = meta.description || "";
      buildForm(schema.action || {});
    } catch (e) {
      showError("could not read the environment's schema: " + e.message);
    }
  }
  $("json-mode").addEventListener("change", () => {
    const on = $("json-mode").checked;
    if (on) { try { $("action-json").value = JSON.stringify(formAction(), null, 2); } catch (e) { $("action-json").value = "{}"; } }
    $("action-json").hidden = !on;
    $("action-form").hidden = on;
  });
  $("action-form").addEventListener("submit", (ev) => { ev.preventDefault(); $("step").click(); });
  $("reset").addEventListener("click", async () => {
    showError("");
    const seed = $("seed").value;
    let data = {};
    const options = $("reset-options").value.trim();
    if (options) {
      try { data = JSON.parse(options); } catch (e) { showError("the reset options are not valid JSON: " + e.message); return; }
      if (!data || typeof data !== "object" || Array.isArray(data)) { showError('the reset options must be a JSON object, e.g. {"max_steps": 5}'); return; }
    }
    if (seed !== "") data.seed = Number(seed);
    try { await send("reset", { type: "reset", data }); } catch (e) { showError(e.message); }
  });
  $("step").addEventListener("click", async () => {
    if (done) return;
    showError("");
    let action;
    try { action = currentAction(); } catch (e) { showError(e.message); return; }
    try { await send("step", { type: "step", data: action }, { action }); } catch (e) { showError(e.message); }
  });
  $("state").addEventListener("click", async () => {
    try { await send("state", { type: "state" }); } catch (e) { showError(e.message); }
  });
  window.addEventListener("pagehide", () => { if (ws) ws.close(1000, "tab closed"); });
  const loaded = load();
})();
