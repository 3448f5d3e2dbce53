// The console's script: live through the relayed event stream (no polling), actions
// as POSTs carrying the page's CSRF token. Text is set with textContent, never HTML.
"use strict";

const main = document.querySelector("main");
const csrf = main ? main.dataset.csrf : "";
const statusLine = document.getElementById("status");

function say(text) {
  if (statusLine) statusLine.textContent = text;
}

async function act(name, arg) {
  const answer = await fetch(`/ui/act/${encodeURIComponent(name)}/${encodeURIComponent(arg)}`, {
    method: "POST",
    headers: { "X-CSRF-Token": csrf },
    credentials: "same-origin",
  });
  if (!answer.ok) {
    let why = `${answer.status}`;
    try {
      const data = await answer.json();
      why = (data.error && (data.error.message || data.error)) || why;
    } catch (e) { /* not JSON */ }
    say(`${name} ${arg}: refused (${why})`);
    return;
  }
  say(`${name} ${arg}: done`);
  if (name === "cancel") {
    const row = document.querySelector(`tr[data-call="${CSS.escape(arg)}"]`);
    if (row) row.remove();
  }
  if (name.startsWith("allow") || name === "deny") {
    const row = document.querySelector(`tr[data-approval="${CSS.escape(arg)}"]`);
    if (row) row.remove();
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-act]");
  if (button) act(button.dataset.act, button.dataset.arg);
});

const logout = document.getElementById("logout");
if (logout) {
  logout.addEventListener("submit", async (event) => {
    event.preventDefault();
    await fetch("/ui/logout", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
    window.location.assign("/ui/login");
  });
}

function serverChanged(event) {
  const row = document.querySelector(`tr[data-server="${CSS.escape(event.server || "")}"]`);
  if (!row) return;
  row.dataset.state = event.state || "";
  row.querySelector("td.state").textContent = event.state || "";
  row.querySelector("td.phase").textContent = event.phase || "";
  setCountdown(row.querySelector("td.retry"), event.next_retry_in_s);
  setAge(row.querySelector("td.since"), 0);
  if (event.state === "backoff" && event.reason) showError(row.querySelector("td.last-error"), event.reason);
}

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  return td;
}

function approvalChanged(event) {
  const body = document.querySelector("#approvals tbody");
  const existing = document.querySelector(`tr[data-approval="${CSS.escape(event.id || "")}"]`);
  if (event.status !== "pending") {
    if (existing) existing.remove();
    return;
  }
  if (existing || !body) return;
  const row = document.createElement("tr");
  row.dataset.approval = event.id;
  for (const text of [event.tool, event.server, "", event.reason, event.tenant]) row.append(cell(text));
  row.children[2].append(document.createElement("code"));  // filled by fillArguments
  const buttons = document.createElement("td");
  for (const [name, label] of [["allow-once", "allow once"], ["allow-session", "for the session"],
                               ["allow-always", "always"], ["deny", "deny"]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.act = name;
    button.dataset.arg = event.id;
    button.textContent = label;
    buttons.append(button);
  }
  row.append(buttons);
  body.append(row);
  fillArguments();
}

// Reads of /ui/fragments/<name> (the API's listing with this session's token), made on
// events, never on a timer: one read at a time, events during a read folded into one
// more read after it. `apply` gets the fragment's JSON.
function fragmentReader(name, apply) {
  let reading = false;
  let again = false;
  return async function read() {
    if (reading) { again = true; return; }
    reading = true;
    try {
      do {
        again = false;
        const answer = await fetch(`/ui/fragments/${name}`, { credentials: "same-origin" });
        if (!answer.ok) { say(`${name}: refused (${answer.status})`); return; }
        apply(await answer.json());
      } while (again);
    } catch (e) {
      say(`${name}: could not read them`);
    } finally {
      reading = false;
    }
  };
}

// The approval event carries no arguments: read them once per pending event.
const fillArguments = fragmentReader("approvals", (data) => {
  for (const item of data.approvals || []) {
    const code = document.querySelector(`tr[data-approval="${CSS.escape(item.id || "")}"] td:nth-child(3) code`);
    if (code && !code.textContent) code.textContent = item.arguments;
  }
});

function callRow(item) {
  const row = document.createElement("tr");
  row.dataset.call = item.call_id || "";
  for (const key of ["call_id", "server", "tool", "tenant", "session", "age_s"]) row.append(cell(item[key]));
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.dataset.act = "cancel";
  cancel.dataset.arg = item.call_id || "";
  cancel.textContent = "cancel";
  const last = document.createElement("td");
  last.append(cancel);
  row.append(last);
  return row;
}

// The calls in flight, read again when an approval is asked (a call waits) or a call
// ends (its `call` event).
const refreshCalls = fragmentReader("calls", (data) => {
  const body = document.querySelector("#calls tbody");
  if (body) body.replaceChildren(...(data.calls || []).map(callRow));
});

// When the event stream opens (and opens again after a drop), the servers are read once:
// a change made between the page's render and its subscription brings no event.
const resyncServers = fragmentReader("servers", (data) => {
  for (const item of data.servers || []) {
    const row = document.querySelector(`tr[data-server="${CSS.escape(item.name || "")}"]`);
    if (!row || row.querySelector("td.state").textContent === (item.state || "")) continue;
    serverChanged({ server: item.name, state: item.state, phase: item.phase,
                    next_retry_in_s: item.retry_in_s, reason: item.last_error });
  }
});

if (main) {
  const events = new EventSource("/ui/events");
  const parsed = (handler) => (message) => {
    try { handler(JSON.parse(message.data)); } catch (e) { /* a frame we do not read */ }
  };
  events.addEventListener("state", parsed(serverChanged));
  events.addEventListener("state", parsed(serverPageChanged));
  events.addEventListener("approval", parsed(approvalChanged));
  events.addEventListener("approval", () => refreshCalls());
  events.addEventListener("open", () => resyncServers());  // what changed before (or between) streams
  events.addEventListener("call", () => refreshCalls());
}

// Ages and countdowns tick on here, with no request: an element with data-age counts up
// from the seconds it was rendered with, one with data-countdown down to zero (the same
// spelling as the server's, supervisor/console/ages.py).
function ageText(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  for (const [unit, size, smaller, smallSize] of [["d", 86400, "h", 3600], ["h", 3600, "min", 60],
                                                   ["min", 60, "s", 1]]) {
    if (whole >= size) {
      const rest = Math.floor((whole % size) / smallSize);
      return `${Math.floor(whole / size)} ${unit}` + (rest ? ` ${rest} ${smaller}` : "");
    }
  }
  return `${whole} s`;
}

function anchor(element) {
  const now = performance.now();
  if (element.dataset.age != null) element.dataset.origin = String(now - Number(element.dataset.age) * 1000);
  if (element.dataset.countdown != null) {
    element.dataset.deadline = String(now + Number(element.dataset.countdown) * 1000);
  }
}

function tick() {
  const now = performance.now();
  for (const element of document.querySelectorAll("[data-origin]")) {
    element.textContent = ageText((now - Number(element.dataset.origin)) / 1000);
  }
  for (const element of document.querySelectorAll("[data-deadline]")) {
    element.textContent = ageText(Math.max(0, Number(element.dataset.deadline) - now) / 1000 + 0.999);
  }
}

function ticking(kind, seconds) {
  const span = document.createElement("span");
  span.className = kind;
  span.dataset[kind] = String(seconds);
  span.textContent = ageText(kind === "countdown" ? seconds + 0.999 : seconds);
  anchor(span);
  return span;
}

function setAge(cell, seconds) {
  if (cell) cell.replaceChildren(ticking("age", seconds), " ago");
}

function setCountdown(cell, seconds) {
  if (cell) cell.replaceChildren(...(seconds == null ? [] : [ticking("countdown", seconds)]));
}

function showError(cell, text) {
  if (!cell) return;
  const error = document.createElement("span");
  error.className = "error";
  error.textContent = text;
  cell.replaceChildren(error, " (", ticking("age", 0), " ago)");
}

function clockNow() {
  const time = document.createElement("time");
  time.textContent = `${new Date().toISOString().slice(11, 19)} UTC`;
  return time;
}

function transitionRow(event) {
  const row = document.createElement("tr");
  const when = document.createElement("td");
  when.append(clockNow(), " (", ticking("age", 0), " ago)");
  row.append(when, cell(event.previous), cell(event.state), cell(event.phase), cell(event.reason));
  row.lastChild.className = "why";
  return row;
}

// A server's page (/ui/servers/<name>) follows its server's state events.
function serverPageChanged(event) {
  const page = document.getElementById("server");
  if (!page || page.dataset.server !== event.server) return;
  page.dataset.state = event.state || "";
  const field = (name) => page.querySelector(`dd.${name}`);
  field("state").textContent = event.state || "";
  field("phase").textContent = event.phase || "";
  field("condition").textContent = event.condition || "";
  field("attempt").textContent = event.attempt == null ? "" : String(event.attempt);
  setCountdown(field("retry"), event.next_retry_in_s);
  field("since").replaceChildren(clockNow(), " (", ticking("age", 0), " ago)");
  if (event.reason) showError(field("last-error"), event.reason);
  if (event.previous === "backoff" && event.state === "resolve") {  // the API's count of reconnects
    field("reconnects").textContent = String(Number(field("reconnects").textContent || 0) + 1);
  }
  document.querySelector("#transitions tbody").append(transitionRow(event));
  if (event.state === "backoff" || event.state === "teardown") {
    document.querySelector("#restarts tbody").append(transitionRow(event));
  }
}

for (const element of document.querySelectorAll("[data-age], [data-countdown]")) anchor(element);
setInterval(tick, 250);
