// The operator console: plain DOM, no framework. Every request is signed
// here with the operator's key (sign.js); every record entry shown is
// checked here against the signed checkpoint (verify.js). Text from the
// server is only ever set as textContent, never parsed as HTML.

import { importOperatorKey, sign } from "./sign.js";
import { parseVerifierKey, verifyEntry } from "./verify.js";

const state = {
  op: null, // {key, kid, alg}: the imported, non-extractable key
  config: null, // /console/config.json
  vk: null, // the parsed record verifier key
  queueCursor: null,
  recordCursor: null,
  pendingIntent: null, // an intent to show when the record screen opens
};

const $ = (id) => document.getElementById(id);

// el builds an element; strings and numbers become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// A Problem is an RFC 9457 answer, or a failure of the console itself
// shaped like one.
class Problem extends Error {
  constructor(p, status) {
    super(p.detail || p.title || "request failed");
    this.p = p;
    this.status = status;
  }
}

function problemView(err) {
  const p = err instanceof Problem ? err.p : { title: "Error", detail: String(err && err.message ? err.message : err) };
  return el("div", { class: "problem", role: "alert" },
    el("strong", {}, p.title || "Problem", err.status ? ` (${err.status})` : ""),
    p.detail ? el("p", {}, p.detail) : null,
    p.code ? el("p", {}, "Code: ", el("code", {}, p.code)) : null,
    p.action ? el("p", {}, "What to do: ", actionText(p.action)) : null);
}

function actionText(a) {
  return {
    fix_request: "change the request and send it again",
    "retry-as-is": "try again later, unchanged",
    retry_later: "try again later",
    reauthenticate: "check your key: the server does not accept it",
    stop: "stop: this cannot succeed",
  }[a] || a;
}

function show(container, ...nodes) {
  container.replaceChildren(...nodes);
}

function status(text) {
  $("status").textContent = text;
}

// money formats an Amount with the currency's own number of decimals.
function money(a) {
  if (!a || typeof a.minor !== "number") return "—";
  try {
    const f = new Intl.NumberFormat("en", { style: "currency", currency: a.currency });
    const d = f.resolvedOptions().maximumFractionDigits;
    return f.format(a.minor / 10 ** d);
  } catch {
    return `${a.minor} ${a.currency} (minor units)`;
  }
}

function duration(s) {
  if (s <= 0) return "expired";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

function basePath() {
  return new URL(state.config.baseURL).pathname.replace(/\/+$/, "");
}

// api sends one operator request, signed, and returns its JSON answer or
// throws a Problem.
async function api(operationId, method, path, body) {
  if (!state.op) {
    throw new Problem({ title: "No key", detail: "Import your operator key first.", code: "console.no_key", action: "fix_request" });
  }
  const full = basePath() + path;
  const bytes = body === undefined ? new Uint8Array() : new TextEncoder().encode(JSON.stringify(body));
  const header = await sign(state.op, { operationId, method, baseURL: state.config.baseURL, pathAndQuery: full, body: bytes });
  const headers = { "Svc-Operator": header, Accept: "application/json, application/problem+json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(full, { method, headers, body: body === undefined ? undefined : bytes, credentials: "omit", cache: "no-store" });
  } catch (e) {
    throw new Problem({ title: "Server unreachable", detail: String(e.message || e), action: "retry-as-is" });
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    throw new Problem(data && typeof data === "object" ? data : { title: res.statusText, detail: text.slice(0, 300) }, res.status);
  }
  return data;
}

function q(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") s.set(k, v);
  const t = s.toString();
  return t ? "?" + t : "";
}

// confirm restates what will happen and resolves true once confirmed.
function confirmAction(title, lines, okLabel) {
  const d = $("confirm");
  $("confirm-h").textContent = title;
  show($("confirm-body"), ...lines.map((l) => el("p", {}, l)));
  $("confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.returnValue = "";
    d.showModal();
    $("confirm-cancel").focus();
  });
}

function rationaleOK(text, out) {
  if (text.trim().length >= 10) return true;
  show(out, problemView(new Problem({ title: "Rationale too short", detail: "Write at least 10 characters: they go into the record with your key id.", action: "fix_request" })));
  return false;
}

// ---- key -------------------------------------------------------------

async function importKey(text) {
  $("key-error").hidden = true;
  try {
    state.op = await importOperatorKey(text);
  } catch (e) {
    $("key-error").textContent = e.message;
    $("key-error").hidden = false;
    return;
  }
  $("key-text").value = ""; // the text of the key is not kept either
  $("key-file").value = "";
  $("key-kid").textContent = state.op.kid;
  $("key-alg").textContent = state.op.alg;
  $("key-none").hidden = true;
  $("key-loaded").hidden = false;
  status(`Key ${state.op.kid} imported.`);
  loadQueue(false);
}

function forgetKey() {
  state.op = null;
  $("key-none").hidden = false;
  $("key-loaded").hidden = true;
  status("Key forgotten.");
}

// ---- approval queue -------------------------------------------------

function contextView(h) {
  const c = h.context;
  if (!c) return null;
  const rows = [];
  const p = c.payee || {};
  rows.push(["Payee", p.firstTime
    ? el("span", { class: "flag" }, "First-time payee for this agent")
    : `Paid ${p.settledCount} time${p.settledCount === 1 ? "" : "s"} before; typical ${money(p.typicalAmount)}`]);
  const v = c.velocity || {};
  if (v.lastHour && v.lastDay) {
    rows.push(["Agent's spending", `last hour ${v.lastHour.count} (${money(v.lastHour.amount)}), last day ${v.lastDay.count} (${money(v.lastDay.amount)})`]);
  }
  if (c.budget) {
    const b = c.budget;
    rows.push(["Mandate budget", `${money(b.remaining)} of ${money(b.limit)} left this ${b.period}` +
      (b.includesThis ? " (this payment already reserved)" : "") + (b.resetsAt ? `, resets ${new Date(b.resetsAt).toLocaleString()}` : "")]);
  }
  if (c.perPaymentCap) rows.push(["Per-payment cap", money(c.perPaymentCap)]);
  if (c.history && c.history.truncated) rows.push(["History", `only the newest ${c.history.scanned} intents were read`]);
  const dl = el("dl", { class: "context" }, rows.map(([k, val]) => [el("dt", {}, k), el("dd", {}, val)]));
  let cart = null;
  if (c.cart && Array.isArray(c.cart.lines)) {
    cart = el("table", { class: "cart" },
      el("caption", {}, `Cart from ${c.cart.merchant}`),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Item"), el("th", { scope: "col" }, "Qty"), el("th", { scope: "col" }, "Unit"), el("th", { scope: "col" }, "Total"))),
      el("tbody", {}, c.cart.lines.map((l) => el("tr", {}, el("td", {}, l.title || l.sku), el("td", {}, l.quantity), el("td", {}, money(l.unitPrice)), el("td", {}, money(l.total))))),
      el("tfoot", {}, el("tr", {}, el("th", { scope: "row", colspan: 3 }, "Total"), el("td", {}, money(c.cart.total)))));
  }
  return [dl, cart];
}

function heldCard(h) {
  const id = h.intentId;
  const out = el("div", { class: "result" });
  const rationale = el("textarea", { id: `r-${id}`, rows: 2, minlength: 10, required: true });
  const ack = el("input", { type: "checkbox", id: `a-${id}` }); // never pre-ticked
  const left = h.context && typeof h.context.secondsLeft === "number" ? h.context.secondsLeft
    : Math.max(0, Math.floor((new Date(h.expiresAt) - Date.now()) / 1000));
  const who = (h.approvals || []).map((a) => `${a.operator} at ${new Date(a.at).toLocaleString()}`).join("; ");
  const kind = h.context && h.context.kind ? h.context.kind : "payment";
  const approve = async () => {
    if (!rationaleOK(rationale.value, out)) return;
    const remaining = h.approvalsRequired - h.approvalsReceived;
    const ok = await confirmAction(`Approve ${money(h.amount)} to ${h.payee}?`, [
      `Intent ${id}, ${kind} by agent ${h.agentKeyId} under mandate ${h.mandateId}.`,
      remaining > 1 ? `Your approval is 1 of the ${remaining} still needed; the ${kind} settles when all are in.`
        : `Yours is the last approval needed: the ${kind} settles now and money moves.`,
      `Acknowledged: ${ack.checked ? "yes" : "no"}. Rationale recorded with your key ${state.op ? state.op.kid : ""}: “${rationale.value.trim()}”`,
    ], "Approve");
    if (!ok) return;
    try {
      const r = await api("operator.approve", "POST", "/operator/approve",
        { intentId: id, mandateId: h.mandateId, rationale: rationale.value.trim(), acknowledged: ack.checked });
      show(out, el("p", { class: "ok", role: "status" }, approvedText(id, r)), recordLink(id));
      card.classList.add("done");
    } catch (e) {
      show(out, problemView(e));
    }
  };
  const decline = async () => {
    if (!rationaleOK(rationale.value, out)) return;
    const ok = await confirmAction(`Decline ${money(h.amount)} to ${h.payee}?`, [
      `Intent ${id} will not be paid, and any budget it reserved is released. This cannot be undone; the agent must ask again.`,
      `Rationale recorded with your key ${state.op ? state.op.kid : ""}: “${rationale.value.trim()}”`,
    ], "Decline");
    if (!ok) return;
    try {
      const r = await api("operator.decline", "POST", "/operator/decline", { intentId: id, mandateId: h.mandateId, rationale: rationale.value.trim() });
      show(out, el("p", { class: "ok", role: "status" }, `Declined: ${id} is ${r.status}.`), recordLink(id));
      card.classList.add("done");
    } catch (e) {
      show(out, problemView(e));
    }
  };
  const card = el("article", { class: "held", "data-intent": id, "aria-labelledby": `h-${id}` },
    el("h3", { id: `h-${id}` }, `${money(h.amount)} to ${h.payee}`),
    el("p", { class: "muted" }, `${kind} ${id} · agent ${h.agentKeyId} · rail ${h.rail} · ${duration(left)} left`),
    h.purpose ? el("p", {}, "Purpose: ", el("q", {}, h.purpose)) : null,
    el("ul", { class: "reasons" }, (h.reasons || []).map((r) => el("li", {}, el("code", {}, r.code), " ", r.message))),
    el("p", {}, `Approvals: ${h.approvalsReceived} of ${h.approvalsRequired}`, who ? ` (${who})` : ""),
    contextView(h),
    el("label", { for: `r-${id}` }, "Rationale (at least 10 characters, written into the record)"),
    rationale,
    el("label", { class: "check" }, ack, h.acknowledgeRequired
      ? " I acknowledge the reasons above (this payment requires it)"
      : " I acknowledge the reasons above"),
    el("p", { class: "actions" },
      el("button", { type: "button", onclick: approve }, "Approve…"),
      el("button", { type: "button", class: "danger", onclick: decline }, "Decline…")),
    out);
  return card;
}

// approvedText says what an approval came to: 200 with the Receipt of a
// settled payment, or a hold's authorization; 202 with the held payment
// when more approvals (or the acknowledgement) are needed.
function approvedText(id, r) {
  if (r.settledAt) return `Approved and settled: ${id}, receipt ${r.id}, rail reference ${r.reference}.`;
  if (r.status === "pending_approval") {
    return `Approval recorded for ${id}: ${r.approvalsReceived} of ${r.approvalsRequired}; it is still waiting.`;
  }
  return `Approved: ${id} is ${r.status || "authorized"}.`;
}

async function loadQueue(more) {
  const list = $("queue-list");
  if (!more) state.queueCursor = null;
  try {
    const page = await api("operator.approvals", "GET", "/operator/approvals" + q({ limit: 20, cursor: more ? state.queueCursor : null }));
    const cards = page.data.map(heldCard);
    if (more) list.append(...cards);
    else show(list, ...(cards.length ? cards : [el("p", { class: "muted" }, "Nothing is waiting for approval.")]));
    state.queueCursor = page.nextCursor;
    $("queue-more").hidden = !page.hasMore;
    status(`${list.querySelectorAll("article.held").length} item(s) waiting for approval.`);
  } catch (e) {
    show(list, problemView(e));
  }
}

// ---- record ---------------------------------------------------------

function recordLink(intentId) {
  // route() shows the intent once the record screen is up.
  return el("p", {}, el("a", { href: "#record", onclick: () => { state.pendingIntent = intentId; } }, "See its entries in the record"));
}

function entryRow(e) {
  const cell = el("td", { class: "verify" }, "checking…");
  const tr = el("tr", { "data-seq": e.seq },
    el("td", {}, e.seq), el("td", {}, new Date(e.at).toLocaleString()), el("td", {}, el("code", {}, e.type)),
    el("td", {}, `${e.actor.kind}: ${e.actor.id}`), el("td", {}, e.intentId || ""), el("td", {}, e.rationale || ""), cell);
  checkEntry(e.seq, cell);
  return tr;
}

// checkEntry fetches the entry with its inclusion proof and verifies both
// here; the cell says verified or why not.
async function checkEntry(seq, cell) {
  try {
    if (!state.vk) throw new Error("no record key to check with");
    const r = await api("audit.entry", "GET", `/audit/entries/${seq}`);
    const v = await verifyEntry(state.vk, r.entry, r.proof);
    cell.textContent = `verified (tree size ${v.treeSize})`;
    cell.className = "verify ok";
  } catch (e) {
    cell.textContent = "not verified: " + (e instanceof Problem ? (e.p.title || e.message) : e.message);
    cell.className = "verify bad";
  }
}

function entriesTable(entries) {
  return el("table", { class: "entries" },
    el("caption", {}, "Entries, each checked in this page"),
    el("thead", {}, el("tr", {}, ["Seq", "At", "Type", "Actor", "Intent", "Rationale", "Inclusion proof"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, entries.map(entryRow)));
}

async function showRecord(more) {
  const list = $("record-list");
  if (!more) state.recordCursor = null;
  try {
    const page = await api("audit.list", "GET", "/audit" + q({ limit: 20, cursor: more ? state.recordCursor : null }));
    if (more) list.querySelector("tbody").append(...page.data.map(entryRow));
    else show(list, entriesTable(page.data));
    state.recordCursor = page.nextCursor;
    $("record-more").hidden = !page.hasMore;
  } catch (e) {
    show(list, problemView(e));
  }
}

async function showIntent(id) {
  const list = $("record-list");
  $("record-more").hidden = true;
  try {
    const page = await api("intents.events", "GET", `/intents/${encodeURIComponent(id)}/events`);
    show(list, entriesTable(page.data));
  } catch (e) {
    show(list, problemView(e));
  }
}

// ---- refund, controls, webhooks -------------------------------------

async function refund(ev) {
  ev.preventDefault();
  const out = $("refund-result");
  const id = $("refund-intent").value.trim(), amt = $("refund-amount").value.trim(), rationale = $("refund-rationale").value.trim();
  if (!id) return show(out, problemView(new Problem({ title: "Intent id missing", detail: "Name the settled payment to refund.", action: "fix_request" })));
  if (amt && !/^[1-9][0-9]{0,15}$/.test(amt)) return show(out, problemView(new Problem({ title: "Bad amount", detail: "The amount is a whole number of minor units (cents for USD), or empty for everything that remains.", action: "fix_request" })));
  if (!rationaleOK(rationale, out)) return;
  const ok = await confirmAction("Refund?", [
    amt ? `Refund ${amt} minor units of payment ${id} to its payer.` : `Refund everything that remains of payment ${id} to its payer.`,
    "Money moves back on the payment's rail; a refund cannot be undone.",
    `Rationale recorded with your key: “${rationale}”`,
  ], "Refund");
  if (!ok) return;
  try {
    const body = { intentId: id, rationale };
    if (amt) body.amountMinor = Number(amt);
    const r = await api("operator.refund", "POST", "/operator/refund", body);
    show(out, el("p", { class: "ok", role: "status" }, `Refunded ${r.refundedMinor} minor units in all; ${r.remainingMinor} remain. Status ${r.status}, record entry ${r.auditSeq}.`));
  } catch (e) {
    show(out, problemView(e));
  }
}

async function controls(ev) {
  ev.preventDefault();
  const out = $("controls-result");
  const action = new FormData($("controls-form")).get("action");
  const rationale = $("controls-rationale").value.trim();
  if (!action) return show(out, problemView(new Problem({ title: "No action chosen", detail: "Choose what to do.", action: "fix_request" })));
  if (!rationaleOK(rationale, out)) return;
  const what = {
    engage: ["Engage the kill switch?", "No payment will settle, on any server of this deployment, until it is released. Held payments stay held.", "Engage"],
    release: ["Release the kill switch?", "Settlement resumes at once for payments the gate allows.", "Release"],
    reset: ["Reset the circuit breaker?", "Payments will be sent to the rails again after the failures that opened it.", "Reset"],
  }[action];
  if (!(await confirmAction(what[0], [what[1], `Rationale recorded with your key: “${rationale}”`], what[2]))) return;
  try {
    const r = action === "reset"
      ? await api("operator.breaker_reset", "POST", "/operator/circuit-breaker/reset", { rationale })
      : await api("operator.kill_switch", "POST", "/operator/kill-switch", { engaged: action === "engage", rationale });
    show(out, el("p", { class: "ok", role: "status" },
      `Kill switch ${r.killSwitchEngaged ? "engaged" : "released"}; circuit breaker ${r.circuitBreakerOpen ? "open" : "closed"}.`));
  } catch (e) {
    show(out, problemView(e));
  }
}

async function loadWebhooks() {
  const list = $("webhooks-list");
  try {
    const page = await api("webhooks.list", "GET", "/webhooks/endpoints" + q({ limit: 100 }));
    if (!page.data.length) return show(list, el("p", { class: "muted" }, "No endpoints."));
    show(list, el("table", { class: "entries" },
      el("thead", {}, el("tr", {}, ["Id", "URL", "Events", "Active", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, page.data.map((w) => el("tr", {},
        el("td", {}, el("code", {}, w.id)), el("td", {}, w.url), el("td", {}, (w.events || []).join(", ")),
        el("td", {}, w.active ? "yes" : `no${w.disabledReason ? ` (${w.disabledReason})` : ""}`),
        el("td", {}, w.active ? el("button", { type: "button", class: "danger", onclick: () => deactivate(w) }, "Deactivate…") : ""))))));
  } catch (e) {
    show(list, problemView(e));
  }
}

async function deactivate(w) {
  const out = $("webhooks-result");
  const rationale = $("webhooks-rationale").value.trim();
  if (!rationaleOK(rationale, out)) {
    $("webhooks-rationale").focus();
    return;
  }
  if (!(await confirmAction("Deactivate this endpoint?", [`${w.url} (${w.id}) will receive no more events until it is activated again.`, `Rationale recorded with your key: “${rationale}”`], "Deactivate"))) return;
  try {
    await api("webhooks.update", "PATCH", `/webhooks/endpoints/${encodeURIComponent(w.id)}`, { active: false, rationale });
    show(out, el("p", { class: "ok", role: "status" }, `Deactivated ${w.id}.`));
    loadWebhooks();
  } catch (e) {
    show(out, problemView(e));
  }
}

async function createWebhook(ev) {
  ev.preventDefault();
  const out = $("webhooks-result");
  const url = $("webhooks-url").value.trim(), rationale = $("webhooks-rationale").value.trim();
  const events = $("webhooks-events").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (!url) return show(out, problemView(new Problem({ title: "URL missing", detail: "Give the endpoint's https URL.", action: "fix_request" })));
  if (!rationaleOK(rationale, out)) return;
  if (!(await confirmAction("Create this endpoint?", [`Events ${events.join(", ") || "(none)"} will be delivered to ${url}, signed with a new secret shown once.`, `Rationale recorded with your key: “${rationale}”`], "Create"))) return;
  try {
    const r = await api("webhooks.create", "POST", "/webhooks/endpoints", { url, events, rationale });
    show(out, el("div", { class: "ok", role: "status" },
      el("p", {}, `Created ${r.id}. Its signing secret is shown this once; copy it into the receiver now:`),
      el("pre", { class: "secret" }, r.secret || "(no secret in the answer)")));
    loadWebhooks();
  } catch (e) {
    show(out, problemView(e));
  }
}

// ---- navigation and start -------------------------------------------

function route() {
  const name = (location.hash || "#queue").slice(1);
  status(""); // a message belongs to the screen it was said on
  const screens = document.querySelectorAll("main > section[data-screen]");
  let found = false;
  for (const s of screens) {
    s.hidden = s.dataset.screen !== name;
    found = found || !s.hidden;
  }
  if (!found) $("screen-queue").hidden = false;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.screen === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!state.op) return;
  if (name === "record") {
    if (state.pendingIntent) {
      $("record-intent").value = state.pendingIntent;
      showIntent(state.pendingIntent);
      state.pendingIntent = null;
    } else if (!$("record-list").hasChildNodes()) {
      showRecord(false);
    }
  }
  if (name === "webhooks") loadWebhooks();
}

async function start() {
  try {
    const res = await fetch("config.json", { cache: "no-store", credentials: "omit" });
    state.config = await res.json();
  } catch (e) {
    status("Could not read the console's configuration: " + e.message);
    return;
  }
  $("deployment").textContent = `${state.config.baseURL}${state.config.sandbox ? " · sandbox" : ""}`;
  $("record-key").textContent = state.config.recordKey || "(none)";
  try {
    state.vk = await parseVerifierKey(state.config.recordKey);
  } catch (e) {
    status("The record key cannot be read, so entries cannot be checked: " + e.message);
  }
  $("key-import").addEventListener("click", () => importKey($("key-text").value));
  $("key-file").addEventListener("change", async (ev) => {
    const f = ev.target.files[0];
    if (f) importKey(await f.text());
  });
  $("key-forget").addEventListener("click", forgetKey);
  $("queue-refresh").addEventListener("click", () => loadQueue(false));
  $("queue-more").addEventListener("click", () => loadQueue(true));
  $("record-intent-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("record-intent").value.trim();
    if (id) showIntent(id);
    else showRecord(false);
  });
  $("record-all").addEventListener("click", () => showRecord(false));
  $("record-more").addEventListener("click", () => showRecord(true));
  $("refund-form").addEventListener("submit", refund);
  $("controls-form").addEventListener("submit", controls);
  $("webhooks-form").addEventListener("submit", createWebhook);
  $("webhooks-refresh").addEventListener("click", loadWebhooks);
  window.addEventListener("hashchange", route);
  route();
  document.body.dataset.ready = "true";
}

start();
