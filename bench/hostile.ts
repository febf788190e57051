// Hostile but valid load (issue 11), against `tessera serve` in a process of its own on
// 127.0.0.1, each scenario on a fresh server:
//
//   bodies    3 concurrent 7.4 MB chat bodies (2,048 messages × 3.6 KB) while /healthz, /readyz,
//             /metrics and /v1/models are probed every 200 ms: the slowest probe, failed probes,
//             the chats' statuses.
//   decision  wide decisions (HOSTILE_WIDE, default 64,4 choice questions × HOSTILE_OPTIONS, default 128
//             options; 8 × 70 is about the largest the default limits allow) each with a
//             16-token chat sent 1 s later: both latencies, the
//             decision's status, the server's peak RSS and its RSS 5 s after.
//   quota     a key with a decision quota of 50, 10 parallel 2-question decisions: how many were
//             admitted and what the account used.
//   sockets   1,100 idle TCP connections, each reopened as soon as it is closed, and 5 tries of
//             /healthz (2 s each).
//   slowbodies (issue 27) 1,100 keyless POSTs with Content-Length 100 from 127.0.0.2–6 (220 each),
//             one body byte every 5 s, each reconnected when closed; /healthz from 127.0.0.7 every
//             200 ms for 20 s and a chat from 127.0.0.8: probes answered, the chat's status.
//   grammar   (issue 27) on a fresh server: 4 different 5-property schemas (maxLength ~200) at
//             once; a `required` tool call beside 4 schemas of 20 strings (maxLength 200–219);
//             the recursive schema 3 times (statuses, RSS); 128 tools × 50,000 characters with a
//             16-token chat 0.3 s after it.
//
//   npx tsx bench/hostile.ts [bodies decision quota sockets slowbodies grammar]   (BENCH_MODELS=tiny|bundled)
import { connect, type Socket } from "node:net";
import { benchModels, startBenchServer, type BenchServer } from "./_server.js";
import {
  accountFigures,
  createKey,
  hugeChatBody,
  peakRssWhile,
  probeWhile,
  rssOf,
  smallDecisionBody,
  wideDecisionBody,
} from "../test/helpers/hostile.js";
import { requestFrom, startSlowBodyFlood } from "../test/helpers/slow-bodies.js";

const MiB = 1024 * 1024;

async function post(server: BenchServer, path: string, body: string, key = server.key) {
  const started = performance.now();
  try {
    const res = await fetch(server.url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(180_000),
    });
    const text = await res.text();
    return { status: res.status, ms: Math.round(performance.now() - started), text };
  } catch (err) {
    return { status: 0, ms: Math.round(performance.now() - started), text: String(err) };
  }
}

const chat16 = JSON.stringify({ model: "textmodel-26b", max_tokens: 16, messages: [{ role: "user", content: "Say hello." }] });

async function bodies(server: BenchServer) {
  const body = hugeChatBody();
  const chats = Promise.all([0, 1, 2].map(() => post(server, "/v1/chat/completions", body)));
  const probes = await probeWhile(server.url, ["/healthz", "/readyz", "/metrics"], chats);
  const answers = await chats;
  return {
    bodyMB: +(body.length / 1e6).toFixed(1),
    chats: answers.map((a) => ({ status: a.status, ms: a.ms, message: a.text.slice(0, 160) })),
    probes,
  };
}

async function decisionBehind(server: BenchServer, questions: number, options: number) {
  const pid = server.child.pid!;
  const alone = await post(server, "/v1/chat/completions", chat16);
  const baseline = rssOf(pid);
  const wide = post(server, "/v1/systemone", wideDecisionBody(questions, options));
  const peak = peakRssWhile(pid, wide);
  await new Promise((r) => setTimeout(r, 1000));
  const chat = await post(server, "/v1/chat/completions", chat16);
  const answer = await wide;
  const peakBytes = await peak;
  await new Promise((r) => setTimeout(r, 5000));
  const after5s = rssOf(pid);
  await new Promise((r) => setTimeout(r, 30_000));
  return {
    questions,
    options,
    decision: { status: answer.status, ms: answer.ms, message: answer.status === 200 ? "" : answer.text.slice(0, 300) },
    chatAloneMs: alone.ms,
    chatBehind: { status: chat.status, ms: chat.ms },
    rssMiB: {
      before: Math.round(baseline / MiB),
      peak: Math.round(peakBytes / MiB),
      after5s: Math.round(after5s / MiB),
      after35s: Math.round(rssOf(pid) / MiB),
    },
  };
}

async function decision(server: BenchServer) {
  const sizes = (process.env["HOSTILE_WIDE"] ?? "64,4").split(",").map(Number);
  const runs = [];
  const options = Number(process.env["HOSTILE_OPTIONS"] ?? "128");
  for (const questions of sizes) runs.push(await decisionBehind(server, questions, options));
  return { runs };
}

async function quota(server: BenchServer) {
  const { key, accountId } = await createKey(server.dataDir, ["--decision-quota", "50"]);
  await new Promise((r) => setTimeout(r, 5500)); // a running server sees new keys within 5 s
  const answers = await Promise.all(Array.from({ length: 10 }, () => post(server, "/v1/systemone", smallDecisionBody(2), key)));
  const statuses: Record<number, number> = {};
  for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
  const refused = answers.find((a) => a.status === 429);
  return { quota: 50, statuses, account: await accountFigures(server.dataDir, accountId), refusal: refused?.text.slice(0, 240) };
}

async function sockets(server: BenchServer) {
  const { hostname, port } = new URL(server.url);
  const open = new Set<Socket>();
  let stopped = false;
  let reopened = 0;
  const openOne = () => {
    if (stopped) return;
    const socket = connect(Number(port), hostname);
    open.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => {
      open.delete(socket);
      reopened++;
      setImmediate(openOne);
    });
  };
  for (let i = 0; i < 1100; i++) openOne();
  await new Promise((r) => setTimeout(r, 2000));
  const tries: { ok: boolean; ms: number }[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    let ok = false;
    try {
      ok = (await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(2000) })).status === 200;
    } catch {
      ok = false;
    }
    tries.push({ ok, ms: Math.round(performance.now() - started) });
    await new Promise((r) => setTimeout(r, 1000));
  }
  stopped = true;
  for (const s of open) s.destroy();
  return { attackerSockets: 1100, reopened, healthz: `${tries.filter((t) => t.ok).length} of 5`, tries };
}

async function slowbodies(server: BenchServer) {
  const port = Number(new URL(server.url).port);
  const flood = startSlowBodyFlood(port, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"], 220, 5000);
  await new Promise((r) => setTimeout(r, 3000));
  const probes: number[] = [];
  const until = performance.now() + 20_000;
  const probing = (async () => {
    while (performance.now() < until) {
      probes.push((await requestFrom(port, "127.0.0.7", { path: "/healthz", timeoutMs: 2000 })).status);
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  await new Promise((r) => setTimeout(r, 5000));
  const headers = { authorization: `Bearer ${server.key}`, "content-type": "application/json" };
  const chat = await requestFrom(port, "127.0.0.8", {
    method: "POST",
    path: "/v1/chat/completions",
    headers,
    body: chat16,
    timeoutMs: 60_000,
  });
  await probing;
  const opened = flood.connections();
  await flood.stop();
  return { floodConnectionsOpened: opened, healthz: `${probes.filter((s) => s === 200).length} of ${probes.length}`, chat };
}

const withSchema = (schema: object) => ({ response_format: { type: "json_schema", json_schema: { name: "s", schema } } });
const chatWith = (extra: object) =>
  JSON.stringify({ model: "textmodel-26b", max_tokens: 16, messages: [{ role: "user", content: "Hi" }], ...extra });
function boundedStrings(tag: string, n: number, bound: number) {
  const properties = Object.fromEntries(Array.from({ length: n }, (_, i) => [`${tag}${i}`, { type: "string", maxLength: bound + i }]));
  return { type: "object", properties, required: Object.keys(properties), additionalProperties: false };
}
const brief = (a: { status: number; ms: number; text: string }) => ({
  status: a.status,
  ms: a.ms,
  message: a.status === 200 ? "" : a.text.slice(0, 160),
});

async function grammar(server: BenchServer) {
  const chatPost = (extra: object) => post(server, "/v1/chat/completions", chatWith(extra));
  const parallel = await Promise.all(["a", "b", "c", "d"].map((tag) => chatPost(withSchema(boundedStrings(tag, 5, 200)))));
  const slow = ["p", "q", "r", "s"].map((tag) => chatPost(withSchema(boundedStrings(tag, 20, 200))));
  await new Promise((r) => setTimeout(r, 300));
  const tools = [
    { type: "function", function: { name: "lookup", parameters: { type: "object", properties: { id: { type: "integer" } } } } },
  ];
  const toolCall = await chatPost({ tools, tool_choice: "required" });
  const slowAnswers = await Promise.all(slow);
  const pid = server.child.pid!;
  const rssBefore = rssOf(pid);
  const recursive = { type: "object", properties: { c: { $ref: "#" } }, required: ["c"], additionalProperties: false };
  const recursiveAnswers = [];
  for (let i = 0; i < 3; i++) recursiveAnswers.push(brief(await chatPost(withSchema(recursive))));
  const rssAfter = rssOf(pid);
  const description = "lorem ipsum dolor sit amet ".repeat(2000).slice(0, 50_000);
  const manyTools = Array.from({ length: 128 }, (_, i) => ({ type: "function", function: { name: `tool${i}`, description } }));
  const big = chatPost({ tools: manyTools });
  await new Promise((r) => setTimeout(r, 300));
  const beside = await chatPost({});
  return {
    parallelSchemas: parallel.map(brief),
    toolCallBesideSlowCompiles: brief(toolCall),
    slowCompiles: slowAnswers.map(brief),
    recursive: { answers: recursiveAnswers, rssMiB: { before: Math.round(rssBefore / MiB), after: Math.round(rssAfter / MiB) } },
    tools128: { refused: brief(await big), chatBeside: brief(beside) },
  };
}

const SCENARIOS: Record<string, (server: BenchServer) => Promise<unknown>> = { bodies, decision, quota, sockets, slowbodies, grammar };

const asked = process.argv.slice(2).filter((a) => a in SCENARIOS);
for (const [model, dir] of benchModels()) {
  for (const name of asked.length > 0 ? asked : Object.keys(SCENARIOS)) {
    const server = await startBenchServer(dir, { TESSERA_DEFAULT_RPM: "100000", TESSERA_INTRA_OP_THREADS: "2" });
    try {
      const result = await SCENARIOS[name]!(server);
      console.log(JSON.stringify({ model, scenario: name, ...(result as object) }));
    } finally {
      await server.stop();
    }
  }
}
