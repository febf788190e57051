// Property-based fuzzing of every endpoint over real HTTP (10,000 generated requests per
// endpoint), against a Tessera in its own process: never a 5xx, never a crash, always the
// documented shape, nothing written to Object.prototype, memory back to its baseline.
//
// The 10,000-request runs use a worker without a model (fake-inference.ts), so a valid body
// costs microseconds instead of a generation; a smaller run does the same against the tiny
// test model through the real engine.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keepAliveClient, rawExchange, type Reply } from "./http-client.js";
import { bodyCase, toText, type BodyCase } from "./json-arbitraries.js";
import { chatBody, decisionBody } from "./request-arbitraries.js";
import { spawnTessera, type MemoryUsage, type TesseraProcess } from "./server-process.js";
import { checkAnyRoute, checkChat, checkDecision, checkModels } from "./shapes.js";

const RUNS = Number(process.env["FUZZ_RUNS"] ?? 10_000);
const SEED = process.env["FUZZ_SEED"] === undefined ? undefined : Number(process.env["FUZZ_SEED"]);
const MiB = 1024 * 1024;

let server: TesseraProcess;
let client: ReturnType<typeof keepAliveClient>;
let port: number;
let baseline: MemoryUsage;
const sent = { chat: 0, systemone: 0, models: 0, routes: 0 };
const ok = { chat: 0, systemone: 0 };

beforeAll(async () => {
  server = await spawnTessera({
    models: "none",
    fakeWorker: { slots: 4, queue: 64 },
    // The playground's routes are tested in test/gateway/playground.test.ts; here `/` is one of the unknown paths.
    // Thousands of wrong keys come from one address: the auth throttle (test/hostile/auth-throttle.test.ts)
    // would answer most of them 429 before they reach the code under fuzz.
    env: { TESSERA_DEFAULT_RPM: "1000000000", TESSERA_LOG_LEVEL: "warn", TESSERA_PLAYGROUND: "off", TESSERA_AUTH_FAILURES_PER_MINUTE: "0" },
  });
  client = keepAliveClient(server.url);
  port = Number(new URL(server.url).port);
  // Warm up every path once before the baseline: lazy modules, caches, JIT.
  for (let i = 0; i < 200; i++) {
    await post("/v1/chat/completions", {
      contentType: "application/json",
      body: Buffer.from(toText(fc.sample(chatBody(), 1)[0]!)),
      damage: "none",
    });
    await post("/v1/systemone", {
      contentType: "application/json",
      body: Buffer.from(toText(fc.sample(decisionBody(), 1)[0]!)),
      damage: "none",
    });
    await client.send({ path: "/v1/models", headers: { authorization: `Bearer ${server.key}` } });
  }
  // Bodies from 128 KiB on are parsed on the body worker thread, whose isolate is part of the
  // process's RSS from its first large body on: start it before the baseline too.
  const large = { model: "textmodel-26b", messages: [{ role: "user", content: "x".repeat(200 * 1024) }] };
  await post("/v1/chat/completions", { contentType: "application/json", body: Buffer.from(JSON.stringify(large)), damage: "none" });
  baseline = await server.memory();
}, 120_000);

afterAll(async () => {
  client?.close();
  await server?.close();
});

function post(path: string, c: BodyCase): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${server.key}` };
  if (c.contentType !== undefined) headers["content-type"] = c.contentType;
  return client.send({ method: "POST", path, headers, body: c.body });
}

/** Fails with the reply when the check finds something wrong. */
function expectShape(problem: string | undefined, reply: Reply, what: string): void {
  if (problem !== undefined) {
    throw new Error(`${what}: ${problem}\nstatus ${reply.status}, body ${reply.body.subarray(0, 400).toString("utf8")}`);
  }
}

function describeCase(c: BodyCase): string {
  return `${c.damage} ${c.contentType ?? "(no content-type)"} ${c.body.length} bytes: ${c.body.subarray(0, 300).toString("latin1")}`;
}

async function expectAlive(): Promise<void> {
  expect(server.exited).toBeUndefined();
  const health = await client.send({ path: "/healthz" });
  expect(health.status).toBe(200);
}

describe("fuzzing over HTTP", () => {
  it(`POST /v1/chat/completions: ${RUNS} generated bodies, never a 5xx, always the documented shape`, async () => {
    await fc.assert(
      fc.asyncProperty(bodyCase(chatBody()), async (c) => {
        sent.chat++;
        const reply = await post("/v1/chat/completions", c);
        expectShape(checkChat(reply), reply, describeCase(c));
        if (reply.status === 200) ok.chat++;
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: false },
    );
    // A good share went all the way through to a generation.
    expect(ok.chat).toBeGreaterThan(RUNS / 5);
    await expectAlive();
  }, 300_000);

  it(`POST /v1/systemone: ${RUNS} generated bodies, never a 5xx, answers keyed exactly by the ids sent`, async () => {
    await fc.assert(
      fc.asyncProperty(bodyCase(decisionBody()), async (c) => {
        sent.systemone++;
        const reply = await post("/v1/systemone", c);
        expectShape(checkDecision(reply), reply, describeCase(c));
        if (reply.status === 200) ok.systemone++;
        if (reply.status === 200 && c.damage === "none") {
          // The ids asked are the keys of the raw body's questions (a duplicate id: its last value wins, as in JSON.parse).
          const sentIds = Object.keys((JSON.parse(c.body.toString("utf8")) as { questions: object }).questions).sort();
          const answered = Object.keys((JSON.parse(reply.body.toString("utf8")) as { answers: object }).answers).sort();
          expect(answered).toEqual(sentIds);
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: false },
    );
    expect(ok.systemone).toBeGreaterThan(RUNS / 5);
    await expectAlive();
  }, 300_000);

  it(`GET /v1/models: ${RUNS} requests with junk queries, headers, methods and keys`, async () => {
    await fc.assert(
      fc.asyncProperty(modelsRequest(), async (r) => {
        sent.models++;
        const reply = await rawExchange(port, r.bytes);
        if (reply.closedWithoutAnswer) throw new Error(`closed without an answer: ${r.bytes.subarray(0, 300).toString("latin1")}`);
        expectShape(checkModels(reply, r.method), reply, r.bytes.subarray(0, 300).toString("latin1"));
        if (r.expectOk) expect(reply.status).toBe(200);
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: false },
    );
    await expectAlive();
  }, 300_000);

  it(`unknown routes and wrong methods: ${RUNS} requests answered 404/405 in the path's error shape`, async () => {
    await fc.assert(
      fc.asyncProperty(anyRouteRequest(), async (r) => {
        sent.routes++;
        const reply = await client.send({ method: r.method, path: r.path, headers: r.headers, body: r.body });
        expectShape(checkAnyRoute(reply, r.path, r.method), reply, `${r.method} ${r.path.slice(0, 200)}`);
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: false },
    );
    await expectAlive();
  }, 300_000);

  it("truncated and lying bodies on raw connections: answered or cut off, never a crash", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("/v1/chat/completions", "/v1/systemone"),
        bodyCase(fc.oneof(chatBody(), decisionBody())),
        fc.constantFrom("short", "long-then-close", "chunked-broken", "chunked-unfinished"),
        async (path, c, lie) => {
          const body = c.body.toString("latin1");
          const head = `POST ${path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${server.key}\r\ncontent-type: application/json\r\n`;
          let bytes: string;
          if (lie === "short") bytes = `${head}content-length: ${Math.floor(c.body.length / 2)}\r\nconnection: close\r\n\r\n${body}`;
          else if (lie === "long-then-close") bytes = `${head}content-length: ${c.body.length + 100}\r\n\r\n${body}`;
          else if (lie === "chunked-broken") bytes = `${head}transfer-encoding: chunked\r\n\r\nzz\r\n${body}\r\n0\r\n\r\n`;
          else bytes = `${head}transfer-encoding: chunked\r\n\r\n${c.body.length.toString(16)}\r\n${body}\r\n`;
          const reply = await rawExchange(port, Buffer.from(bytes, "latin1"), { endAfterWrite: lie !== "short", timeoutMs: 10_000 });
          // A body that never completes cannot be answered; the connection must just close.
          if (reply.closedWithoutAnswer) return;
          expect(reply.status).toBeLessThan(500);
        },
      ),
      { numRuns: Math.ceil(RUNS / 20), seed: SEED, endOnFailure: false },
    );
    await expectAlive();
  }, 300_000);

  it("leaves Object.prototype untouched, logs no error, and returns to its memory baseline", async () => {
    const state = await server.state();
    expect(state.polluted).toEqual([]);
    expect(state.prototype).toEqual(Object.getOwnPropertyNames(Object.prototype).sort());
    expect(state.logs.filter((line) => /"level":"(error|fatal)"/.test(line))).toEqual([]);
    const after = await server.memory();
    const report = {
      requests: sent,
      answered200: ok,
      baselineMiB: { rss: baseline.rss / MiB, heapUsed: baseline.heapUsed / MiB },
      afterMiB: { rss: after.rss / MiB, heapUsed: after.heapUsed / MiB },
    };
    console.log(`fuzz memory: ${JSON.stringify(report)}`);
    // The heap (after full GCs) is what a leak grows; RSS also holds pages V8 keeps for reuse.
    expect(after.heapUsed - baseline.heapUsed).toBeLessThan(16 * MiB);
    expect(after.rss - baseline.rss).toBeLessThan(96 * MiB);
  }, 60_000);
});

describe("fuzzing the tiny model through the real engine", () => {
  const TINY_RUNS = Math.max(20, Math.ceil(RUNS / 40));
  let tiny: TesseraProcess;
  let tinyClient: ReturnType<typeof keepAliveClient>;

  beforeAll(async () => {
    tiny = await spawnTessera({ models: "tiny", env: { TESSERA_DEFAULT_RPM: "1000000000", TESSERA_LOG_LEVEL: "warn" } });
    tinyClient = keepAliveClient(tiny.url);
  }, 60_000);
  afterAll(async () => {
    tinyClient?.close();
    await tiny?.close();
  });

  const send = (path: string, c: BodyCase) =>
    tinyClient.send({
      method: "POST",
      path,
      headers: { authorization: `Bearer ${tiny.key}`, "content-type": c.contentType ?? "application/json" },
      body: c.body,
    });

  it(`POST /v1/chat/completions and /v1/systemone: ${TINY_RUNS} bodies each, generated and scored by the tiny model`, async () => {
    const answered = { chat: 0, systemone: 0 };
    await fc.assert(
      fc.asyncProperty(bodyCase(chatBody({ maxTokensOmit: 0 })), async (c) => {
        const reply = await send("/v1/chat/completions", c);
        expectShape(checkChat(reply), reply, describeCase(c));
        if (reply.status === 200) answered.chat++;
      }),
      { numRuns: TINY_RUNS, seed: SEED, endOnFailure: false },
    );
    await fc.assert(
      fc.asyncProperty(bodyCase(decisionBody()), async (c) => {
        const reply = await send("/v1/systemone", c);
        expectShape(checkDecision(reply), reply, describeCase(c));
        if (reply.status === 200) answered.systemone++;
      }),
      { numRuns: TINY_RUNS, seed: SEED, endOnFailure: false },
    );
    console.log(`tiny model fuzz: ${JSON.stringify({ runs: TINY_RUNS, answered })}`);
    // Enough of the generated bodies are valid to reach the model.
    expect(answered.chat).toBeGreaterThan(TINY_RUNS / 20);
    expect(answered.systemone).toBeGreaterThan(TINY_RUNS / 20);
    expect(tiny.exited).toBeUndefined();
    const state = await tiny.state();
    expect(state.polluted).toEqual([]);
    expect(state.logs.filter((line) => /"level":"(error|fatal)"/.test(line))).toEqual([]);
  }, 300_000);
});

// --- GET /v1/models and other routes ------------------------------------------------------------

const QUERY_PIECES = [
  "a=1",
  "a=1&a=2",
  "%00",
  "%ff",
  "%",
  "%zz",
  "limit=-1",
  "limit=1e999",
  "__proto__[x]=1",
  "constructor.prototype.x=1",
  "&&&",
  "?",
  "#frag",
  "a=%E2%82%AC",
  ";",
  `x=${"q".repeat(300)}`,
];
const HEADER_VALUE_BYTES = fc.uint8Array({ minLength: 0, maxLength: 40 }).map((bytes) =>
  // Visible ASCII, space, tab and obs-text bytes: what HTTP allows in a value, sometimes with a CR/LF/NUL that it does not.
  Buffer.from(bytes.map((b) => (b < 0x20 ? [0x09, 0x20, 0x0d, 0x0a, 0x00][b % 5]! : b === 0x7f ? 0x41 : b))),
);
const HEADER_NAME = fc.oneof(
  fc.stringMatching(/^[a-zA-Z0-9!#$%&'*+.^_`|~-]{1,20}$/),
  fc.constantFrom(
    "content-length",
    "transfer-encoding",
    "host",
    "authorization",
    "expect",
    "connection",
    "x-service-request-id",
    "content-type",
    "bad header",
    "x:y",
    "",
  ),
);

interface RawRequest {
  bytes: Buffer;
  method: string;
  /** A well-formed, authorized GET of the listing: must be 200. */
  expectOk: boolean;
}

function modelsRequest(): fc.Arbitrary<RawRequest> {
  return fc
    .record({
      method: fc.constantFrom("GET", "GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "FOO", "get"),
      path: fc.constantFrom(
        "/v1/models",
        "/v1/models",
        "/v1/models",
        "/v1/models/",
        "/V1/MODELS",
        "//v1/models",
        "/v1/./models",
        "/v1/models%00",
        "*",
        "http://x/v1/models",
      ),
      query: fc.option(
        fc.oneof(
          fc.array(fc.constantFrom(...QUERY_PIECES), { maxLength: 4 }).map((p) => p.join("&")),
          fc.string({ maxLength: 30 }),
          fc.constant("z".repeat(9000)),
        ),
        { freq: 2 },
      ),
      auth: fc.constantFrom("valid", "valid", "valid", "none", "empty", "bearer-only", "junk", "basic", "twice", "huge", "lowercase"),
      extra: fc.array(fc.tuple(HEADER_NAME, HEADER_VALUE_BYTES), { maxLength: 3 }),
      version: fc.constantFrom("HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", ""),
      host: fc.constantFrom(true, true, true, false),
    })
    .map(({ method, path, query, auth, extra, version, host }) => {
      const key = server.key;
      const authLines: Record<string, string[]> = {
        valid: [`authorization: Bearer ${key}`],
        lowercase: [`authorization: bearer ${key}`],
        none: [],
        empty: ["authorization: "],
        "bearer-only": ["authorization: Bearer"],
        junk: [`authorization: Bearer ${key}x`],
        basic: ["authorization: Basic dXNlcjpwYXNz"],
        twice: [`authorization: Bearer ${key}`, "authorization: Bearer tsr_other"],
        huge: [`authorization: Bearer tsr_${"k".repeat(20_000)}`],
      };
      const target = query === null ? path : `${path}?${query}`;
      const head = Buffer.from(
        `${[
          `${method} ${target} ${version}`.trimEnd(),
          ...(host ? ["host: 127.0.0.1"] : []),
          ...authLines[auth]!,
          "connection: close",
        ].join("\r\n")}\r\n`,
        "latin1",
      );
      const extras = extra.map(([name, value]) =>
        Buffer.concat([Buffer.from(`${name}: `, "latin1"), Buffer.from(value), Buffer.from("\r\n")]),
      );
      const bytes = Buffer.concat([head, ...extras, Buffer.from("\r\n")]);
      const expectOk =
        method === "GET" &&
        path === "/v1/models" &&
        (query === null || /^[A-Za-z0-9=&%._~;-]{0,400}$/.test(query)) &&
        (auth === "valid" || auth === "lowercase") &&
        extra.length === 0 &&
        version === "HTTP/1.1" &&
        host;
      return { bytes, method, expectOk };
    });
}

function anyRouteRequest() {
  const key = server === undefined ? "" : server.key;
  return fc
    .record({
      method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"),
      path: fc
        .oneof(
          fc.constantFrom(
            "/",
            "/v1",
            "/v1/",
            "/v2/models",
            "/v1/chat",
            "/v1/chat/",
            "/v1/chat/completions/x",
            "/v1/completions",
            "/v1/responses",
            "/v1/embeddings",
            "/healthz/x",
            "/metrics",
            "/healthz",
            "/v1/models",
            "/v1/systemone",
            "/v1/chat/completions",
            "/tessera.accounting.v1.AccountingService/CreateKey",
            "/tessera.nope/X",
            "/__proto__",
            "/constructor/prototype",
            "/%2e%2e/%2e%2e/etc/passwd",
          ),
          fc.webPath().map((p) => (p.startsWith("/") ? p : `/${p}`)),
          fc.string({ maxLength: 40 }).map((s) => `/${encodeURIComponent(s)}`),
        )
        .filter((p) => !p.startsWith("/readyz")),
      headers: fc.constantFrom<Record<string, string>>({}, { authorization: `Bearer ${key}` }, { "content-type": "application/json" }),
      body: fc
        .option(fc.constantFrom(Buffer.from("{}"), Buffer.from("not json"), Buffer.alloc(10_000, 0x61)), { freq: 3 })
        .map((b) => b ?? undefined),
    })
    .map((r) => (r.method === "GET" || r.method === "HEAD" ? { ...r, body: undefined } : r));
}
