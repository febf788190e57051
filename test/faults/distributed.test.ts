// Faults of distributed mode with real processes and a real nats-server (issue 6): two
// gateways, two accounting replicas, two inference workers, a registry and a decision
// service share one cluster. The tests run in order and each leaves the cluster as the
// next expects it (a worker and a replica are killed on the way).
import { spawnSync } from "node:child_process";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService, QuestionType } from "../../gen/tessera/decision/v1/decision_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { USAGE_CONSUMER, USAGE_STREAM } from "../../lib/nats/usage-stream.js";
import { bearerInterceptor, connectTransport } from "../../lib/remote/clients.js";
import { REPO_ROOT } from "../helpers/tessera.js";
import { startCluster, type Cluster, type TesseraProcess } from "./cluster.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({
    // Redelivery of a dead replica's unacked usage events within the test.
    env: { TESSERA_USAGE_ACK_WAIT_MS: "5000", TESSERA_DEFAULT_RPM: "1000000" },
    // One token per denoising step: a long reply takes long enough to be cut in the middle.
    inferenceEnv: { TESSERA_UNMASK_THRESHOLD: "1" },
  });
}, 120_000);

afterAll(async () => {
  await cluster?.close();
});

const codeOf = (call: Promise<unknown>) =>
  call.then(
    () => "ok" as const,
    (err: unknown) => ConnectError.from(err).code,
  );

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms: number): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end)
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ""}\n${cluster.logs(15)}`);
    await sleep(200);
  }
}

async function newKey(rpm?: number) {
  const created = await cluster.admin.createKey({ name: "faults", limits: rpm === undefined ? {} : { requestsPerMinute: rpm } });
  return { apiKey: created.apiKey, keyId: created.key!.keyId };
}

/** The key's ledger summed over its days. */
async function ledger(keyId: string) {
  const { days } = await cluster.admin.getUsage({ keyId });
  const sum = (pick: (d: (typeof days)[number]) => bigint) => Number(days.reduce((total, d) => total + pick(d), 0n));
  return {
    requests: sum((d) => d.requests),
    prompt: sum((d) => d.promptTokens),
    completion: sum((d) => d.completionTokens),
    decisionInput: sum((d) => d.decisionInputTokens),
  };
}

function post(gateway: TesseraProcess, path: string, apiKey: string, body: unknown, signal?: AbortSignal) {
  return fetch(`${gateway.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal && { signal }),
  });
}

const decisionBody = (i: number) => ({
  model: "decisionmodel-latest",
  state: `order ${i}: ${"late ".repeat(i % 9)}delivery`,
  questions: { late: { type: "noul", instructions: "Was it late?" } },
});

/** Parses an SSE body as it arrives; calls `onEvent` for every `data:` payload. */
async function readSse(res: Response, onEvent: (data: string) => void | Promise<void>): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body!) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) if (line.startsWith("data: ")) await onEvent(line.slice(6));
    }
  }
}

/** Deliveries of usage events beyond the first (the consumer's sequence runs ahead of the stream's). */
async function redeliveries(): Promise<number> {
  const nc = await connect({ servers: cluster.nats.url });
  try {
    const { delivered } = await (await jetstreamManager(nc)).consumers.info(USAGE_STREAM, USAGE_CONSUMER);
    return delivered.consumer_seq - delivered.stream_seq;
  } finally {
    await nc.close();
  }
}

/** Calls of one accounting RPC this process has answered (its /metrics). */
async function rpcCount(proc: TesseraProcess, method: string): Promise<number> {
  const text = await (await fetch(`${proc.url}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith("tessera_http_requests_total{") && l.includes(`route="/tessera.accounting.v1.AccountingService/${method}"`))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
}

async function slotsBusy(worker: TesseraProcess): Promise<number> {
  const text = await (await fetch(`${worker.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("tessera_generation_slots_busy{"));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

describe("distributed mode under faults", () => {
  it("serves the typed API behind API keys on the gateways, never accounting; accounting's admin RPCs need the admin token", async () => {
    const viaGateway = (token?: string) =>
      createConnectTransport({
        baseUrl: cluster.gateways[1]!.url,
        httpVersion: "1.1",
        interceptors: token === undefined ? [] : [bearerInterceptor(token)],
      });
    const registry = createClient(RegistryService, viaGateway(cluster.key));
    const { models } = await registry.listModels({});
    expect(models.map((m) => m.id)).toContain("decisionmodel-latest");
    const decided = await createClient(DecisionService, viaGateway(cluster.key)).decide({
      model: "jev-latest",
      state: { kind: { case: "stringValue", value: "cold soup" } },
      questions: { q: { type: QuestionType.NOUL } },
    });
    expect(decided.model).toBe("decisionmodel-0.1");
    expect(await codeOf(createClient(RegistryService, viaGateway()).listModels({}))).toBe(Code.Unauthenticated);
    // The public port has no accounting paths at all (HTTP 404, which Connect reads as Unimplemented).
    expect(await codeOf(createClient(AccountingService, viaGateway(cluster.adminToken)).listKeys({}))).toBe(Code.Unimplemented);
    // On accounting's own port: admin RPCs with the admin token only.
    const direct = (token?: string) =>
      createClient(
        AccountingService,
        connectTransport(cluster.accounting[0]!.url, { interceptors: token === undefined ? [] : [bearerInterceptor(token)] }),
      );
    expect(await codeOf(direct().listKeys({}))).toBe(Code.Unauthenticated);
    expect(await codeOf(direct("not-the-admin-token-at-all").listKeys({}))).toBe(Code.PermissionDenied);
    expect(await codeOf(direct(cluster.adminToken).listKeys({}))).toBe("ok");
  });

  it("admits exactly 60 of 200 parallel requests on a key limited to 60 per minute, spread over both gateways", async () => {
    const { apiKey } = await newKey(60);
    const admitsBefore = await Promise.all(cluster.accounting.map((a) => rpcCount(a, "Admit")));
    await roomInThisMinute(10_000);

    const responses = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const res = await fetch(`${cluster.gateways[i % 2]!.url}/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } });
        return { status: res.status, gateway: i % 2, body: await res.text() };
      }),
    );
    const count = (status: number) => responses.filter((r) => r.status === status).length;
    expect(
      count(200),
      responses
        .filter((r) => r.status !== 200 && r.status !== 429)
        .map((r) => r.body)
        .join("\n"),
    ).toBe(60);
    expect(count(429)).toBe(140);
    const refused = JSON.parse(responses.find((r) => r.status === 429)!.body) as { detail: { error_type: string } };
    expect(refused.detail.error_type).toBe("rate_limit_error");
    // Both replicas counted requests into the one window (compare-and-set on the same KV key).
    const admitsAfter = await Promise.all(cluster.accounting.map((a) => rpcCount(a, "Admit")));
    expect(admitsAfter.map((n, i) => n - admitsBefore[i]!).every((n) => n > 20)).toBe(true);
  });

  it("ends a stream with an error event when its worker is killed mid-reply, sends the next requests to the other worker, and charges what was delivered once", async () => {
    const { apiKey, keyId } = await newKey();
    const gateway = cluster.gateways[0]!;
    const messages = [{ role: "user", content: "1 2 3 4 5 6 7 8" }];

    // The prompt's size as the gateway counts it (its own request and key).
    const probe = await newKey();
    const counted = (await (
      await post(gateway, "/v1/chat/completions", probe.apiKey, { model: "textmodel-26b", messages, max_tokens: 1 })
    ).json()) as {
      usage: { prompt_tokens: number };
    };

    const res = await post(gateway, "/v1/chat/completions", apiKey, { model: "textmodel-26b", messages, max_tokens: 2000, stream: true });
    expect(res.status).toBe(200);
    let delivered = "";
    let killed: TesseraProcess | undefined;
    let errorEvent: { error: { message: string; type: string } } | undefined;
    let done = false;
    const started = Date.now();
    await readSse(res, async (data) => {
      if (data === "[DONE]") {
        done = true;
        return;
      }
      const event = JSON.parse(data) as { choices?: { delta?: { content?: string } }[]; error?: { message: string; type: string } };
      if (event.error !== undefined) errorEvent = event as typeof errorEvent;
      const content = event.choices?.[0]?.delta?.content ?? "";
      delivered += content;
      if (content !== "" && killed === undefined) {
        const busy = await Promise.all(cluster.inference.map(slotsBusy));
        killed = cluster.inference[busy.findIndex((n) => n > 0)];
        expect(killed, `no worker was generating any more (busy slots ${busy.join(", ")})`).toBeDefined();
        await killed!.kill9();
      }
    });
    expect(killed).toBeDefined();
    expect(errorEvent, `the stream ended without an error event (done: ${done})`).toBeDefined();
    expect(errorEvent!.error.type).toBe("api_error");
    expect(delivered.length).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(15_000);

    // At once (the killed worker's heartbeat has not expired yet): the other worker answers.
    const next = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        post(cluster.gateways[i % 2]!, "/v1/chat/completions", probe.apiKey, {
          model: "textmodel-26b",
          messages: [{ role: "user", content: `hello ${i}` }],
          max_tokens: 8,
        }),
      ),
    );
    expect(next.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const streamed = await post(gateway, "/v1/chat/completions", probe.apiKey, {
      model: "textmodel-26b",
      messages: [{ role: "user", content: "again" }],
      max_tokens: 8,
      stream: true,
    });
    expect(await streamed.text()).toMatch(/data: \[DONE\]\n\n$/);

    // Charged once: the prompt and the completion tokens the engine reported with the last delta
    // that reached the client (its `completion_tokens`, which an SSE client does not see: some,
    // and less than max_tokens; gateway/routes/text-generation.test.ts checks the equality).
    const charged = await until(
      "the stream's usage in the ledger",
      async () => {
        const usage = await ledger(keyId);
        return usage.requests >= 1 ? usage : undefined;
      },
      20_000,
    );
    expect(charged).toMatchObject({ requests: 1, prompt: counted.usage.prompt_tokens, decisionInput: 0 });
    expect(charged.completion).toBeGreaterThan(0);
    expect(charged.completion).toBeLessThan(2000);
    await sleep(1_000);
    expect(await ledger(keyId)).toEqual(charged);
    console.info(
      `worker kill: ${killed!.name} killed after ${delivered.length} characters; error event "${errorEvent!.error.message}"; charged ${JSON.stringify(charged)}`,
    );
  });

  it("keeps the ledger exact when an accounting replica is killed during 500 requests", async () => {
    const { apiKey, keyId } = await newKey();
    const redeliveredBefore = await redeliveries();
    let completed = 0;
    let killedAt: number | undefined;
    const results: { status: number; inputTokens: number }[] = [];
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < 500; i = next++) {
        // A request that never ends fails here, with the cluster's logs, instead of timing the test out.
        const res = await post(cluster.gateways[i % 2]!, "/v1/systemone", apiKey, decisionBody(i), AbortSignal.timeout(60_000)).catch(
          (err: unknown) => {
            throw new Error(`request ${i}: ${String(err)}\n${cluster.logs(15)}`);
          },
        );
        const body = (await res.json()) as { usage?: { input_tokens: number } };
        results.push({ status: res.status, inputTokens: res.status === 200 ? body.usage!.input_tokens : 0 });
        completed += 1;
        if (completed === 100 && killedAt === undefined) {
          killedAt = completed;
          void cluster.accounting[0]!.kill9();
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(killedAt).toBe(100);
    expect(results).toHaveLength(500);

    const ok = results.filter((r) => r.status === 200);
    const others = results.filter((r) => r.status !== 200);
    // Calls cut by the kill are retried on the other replica; whatever failed is a retryable 503.
    expect(others.every((r) => r.status === 503)).toBe(true);
    expect(ok.length).toBeGreaterThan(450);
    const expected = ok.reduce((sum, r) => sum + r.inputTokens, 0);

    // The dead replica's unacknowledged usage events are redelivered after the 5 s ack wait.
    const loadEnded = Date.now();
    const usage = await until(
      "the ledger to reach the responses' usage",
      async () => {
        const current = await ledger(keyId);
        return current.decisionInput >= expected ? current : undefined;
      },
      40_000,
    );
    expect(usage.decisionInput).toBe(expected);
    // Requests that failed after admission are settled with zero usage: counted, never charged.
    expect(usage.requests).toBeGreaterThanOrEqual(ok.length);
    expect(usage.requests).toBeLessThanOrEqual(500);
    await sleep(1_000);
    expect((await ledger(keyId)).decisionInput).toBe(expected);
    const redeliveredAfter = await redeliveries();
    console.info(
      `accounting kill: ${ok.length} of 500 answered 200 (${others.length} 503); ledger ${usage.decisionInput} input tokens in ${usage.requests} requests, ` +
        `exact ${Date.now() - loadEnded - 1_000} ms after the load; usage events redelivered: ${redeliveredAfter - redeliveredBefore}`,
    );
  }, 150_000); // a loaded 2-core machine can take a while for 500 requests through five processes

  it("answers 503 fast while NATS is down for 10 s, and recovers without a restart", async () => {
    const { apiKey, keyId } = await newKey();
    const ask = (gateway: TesseraProcess, i: number) => post(gateway, "/v1/systemone", apiKey, decisionBody(i));
    expect((await ask(cluster.gateways[0]!, 0)).status).toBe(200);

    const runningBefore = cluster
      .all()
      .filter((p) => p.alive())
      .map((p) => p.pid);
    await cluster.nats.stop();
    const outageStarted = Date.now();
    const during: { status: number; ms: number; route: string }[] = [];
    let i = 1;
    while (Date.now() - outageStarted < 10_000) {
      await Promise.all(
        cluster.gateways.map(async (gateway) => {
          for (const route of ["/v1/systemone", "/v1/models"]) {
            const t0 = Date.now();
            const res =
              route === "/v1/models"
                ? await fetch(`${gateway.url}${route}`, { headers: { authorization: `Bearer ${apiKey}` } })
                : await ask(gateway, i++);
            await res.arrayBuffer();
            during.push({ status: res.status, ms: Date.now() - t0, route });
          }
        }),
      );
      await sleep(250);
    }
    await cluster.nats.start();
    const restartedAt = Date.now();

    expect(during.length).toBeGreaterThan(20);
    expect(
      during.filter((r) => r.status !== 503),
      JSON.stringify(during.filter((r) => r.status !== 503)),
    ).toEqual([]);
    expect(Math.max(...during.map((r) => r.ms))).toBeLessThan(2_500);

    // Back without restarting anything: every gateway answers decisions and chats and lists the
    // models. Each service sees its peers again on its own schedule (the decision service's view
    // of the workers can come back a heartbeat before a gateway's), so recovery is when all answer.
    const chatBack = (gateway: TesseraProcess, n: number) =>
      post(gateway, "/v1/chat/completions", apiKey, {
        model: "textmodel-26b",
        messages: [{ role: "user", content: `back ${n}?` }],
        max_tokens: 1,
      });
    await until(
      "the gateways to answer again",
      async () => {
        const statuses = await Promise.all(
          cluster.gateways
            .flatMap((g, n) => [ask(g, 1000 + n), chatBack(g, n)])
            .map(async (pending) => {
              const res = await pending;
              await res.arrayBuffer();
              return res.status;
            }),
        );
        return statuses.every((s) => s === 200) ? true : undefined;
      },
      30_000,
    );
    const recoveredMs = Date.now() - restartedAt;
    for (const gateway of cluster.gateways) {
      const listing = (await (await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as {
        models: { name: string }[];
      };
      expect(listing.models.map((m) => m.name)).toContain("decisionmodel-latest");
      const chat = await post(gateway, "/v1/chat/completions", apiKey, {
        model: "textmodel-26b",
        messages: [{ role: "user", content: "back?" }],
        max_tokens: 4,
      });
      expect(chat.status).toBe(200);
    }
    // Nothing was restarted: the processes running before the outage are the same ones, still running.
    expect(
      cluster
        .all()
        .filter((p) => p.alive())
        .map((p) => p.pid),
    ).toEqual(runningBefore);
    // Usage of the requests after the outage reaches the ledger: the consumer came back too.
    await until("usage after the outage in the ledger", async () => ((await ledger(keyId)).requests >= 3 ? true : undefined), 30_000);
    console.info(
      `NATS outage: ${during.length} requests answered 503 in at most ${Math.max(...during.map((r) => r.ms))} ms; recovered ${recoveredMs} ms after NATS came back`,
    );
  }, 120_000);

  it("tessera keys goes to accounting at TESSERA_ACCOUNTING_URL with the admin token, failing over past the dead replica", async () => {
    const urls = cluster.accounting.map((a) => a.url).join(",");
    const keys = (args: string[], env: Record<string, string>) =>
      spawnSync(process.execPath, ["--import", "tsx", "bin/tessera.ts", "keys", ...args], {
        cwd: REPO_ROOT,
        env: { ...process.env, TESSERA_ACCOUNTING_URL: urls, ...env },
        encoding: "utf8",
        timeout: 60_000,
      });
    const created = keys(["create", "--name", "cli", "--rpm", "7"], { TESSERA_ADMIN_TOKEN: cluster.adminToken });
    expect(created.status, created.stderr).toBe(0);
    const apiKey = created.stdout.trimEnd().split("\n").at(-1)!;
    expect(apiKey).toMatch(/^tsr_/);
    const res = await fetch(`${cluster.gateways[1]!.url}/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("6");

    const refused = keys(["list"], { TESSERA_ADMIN_TOKEN: "" });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/TESSERA_ADMIN_TOKEN/);
  });
});
