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
  row.querySelector("td.retry").textContent = event.next_retry_in_s == null ? "" : String(event.next_retry_in_s);
  if (event.state === "backoff" && event.reason) row.querySelector("td.last-error").textContent = event.reason;
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

// The approval event carries no arguments: read them once per pending event from
// /ui/fragments/approvals (the API's GET /v1/approvals with this session's token),
// one read at a time (events during a read make one more read after it).
let reading = false;
let readAgain = false;
async function fillArguments() {
  if (reading) { readAgain = true; return; }
  reading = true;
  try {
    do {
      readAgain = false;
      const answer = await fetch("/ui/fragments/approvals", { credentials: "same-origin" });
      if (!answer.ok) { say(`approvals: refused (${answer.status})`); return; }
      for (const item of (await answer.json()).approvals || []) {
        const code = document.querySelector(`tr[data-approval="${CSS.escape(item.id || "")}"] td:nth-child(3) code`);
        if (code && !code.textContent) code.textContent = item.arguments;
      }
    } while (readAgain);
  } catch (e) {
    say("approvals: could not read their arguments");
  } finally {
    reading = false;
  }
}

if (main) {
  const events = new EventSource("/ui/events");
  const parsed = (handler) => (message) => {
    try { handler(JSON.parse(message.data)); } catch (e) { /* a frame we do not read */ }
  };
  events.addEventListener("state", parsed(serverChanged));
  events.addEventListener("approval", parsed(approvalChanged));
}
