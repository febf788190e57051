// A gateway killed with -9 in distributed mode (issue 11, item 5): its stream in flight is
// charged what it had delivered and its hold is released by accounting's sweep of requests
// whose gateway's heartbeat lapsed (services/accounting/sweep.ts), without any restart.
// Real processes: a nats-server, an accounting process, and a gateway process that also runs
// the registry, the decision service and an inference worker on a model that never stops.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { bearerInterceptor, serviceTransport } from "../../lib/remote/clients.js";
import { endlessTinyModel } from "../helpers/endless-model.js";
import { writeModelsConfig } from "../helpers/tessera.js";
import { startNatsServer, type NatsServerHandle } from "../nats/nats-server.js";
import { freePorts, spawnTessera, type TesseraProcess } from "./cluster.js";

const scratch = mkdtempSync(join(tmpdir(), "tessera-gateway-killed-"));
const started: TesseraProcess[] = [];
let nats: NatsServerHandle | undefined;

afterAll(async () => {
  await Promise.all(started.map((p) => p.kill9()));
  await nats?.dispose();
  rmSync(scratch, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const MAX_TOKENS = 4096;
const MODEL = "textmodel-26b";

describe("a gateway killed with -9 in distributed mode", () => {
  it("has its stream charged what it delivered and its hold released by the sweep, within a minute", { timeout: 150_000 }, async () => {
    nats = await startNatsServer();
    const adminToken = randomBytes(24).toString("hex");
    const [accountingPort] = await freePorts(1);
    const accountingUrl = `http://127.0.0.1:${accountingPort}`;
    const base = {
      TESSERA_NATS_URL: nats.url,
      TESSERA_MODELS_CONFIG: writeModelsConfig(scratch, endlessTinyModel(scratch)),
      TESSERA_LOG_LEVEL: "info",
      TESSERA_DEFAULT_RPM: "100000",
    };
    const [accounting, gateway] = await Promise.all([
      spawnTessera("accounting", ["accounting"], {
        ...base,
        TESSERA_PORT: String(accountingPort),
        TESSERA_ADMIN_TOKEN: adminToken,
        TESSERA_GATEWAY_SWEEP_INTERVAL_MS: "1000",
      }),
      spawnTessera("gateway", ["gateway", "registry", "decision", "inference"], {
        ...base,
        TESSERA_ACCOUNTING_URL: accountingUrl,
        TESSERA_INTRA_OP_THREADS: "1",
        // One token per denoising step: a slower stream, surely still running when it is killed.
        TESSERA_UNMASK_POLICY: "threshold",
        TESSERA_UNMASK_THRESHOLD: "1",
      }),
    ]);
    started.push(accounting!, gateway!);
    const logs = () => started.map((p) => `--- ${p.name}\n${p.output.slice(-20).join("\n")}`).join("\n");
    const admin = createClient(
      AccountingService,
      serviceTransport([accountingUrl], { timeoutMs: 10_000, interceptors: [bearerInterceptor(adminToken)] }),
    );
    const chat = (apiKey: string, maxTokens: number, stream: boolean) =>
      fetch(`${gateway!.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: MODEL,
          max_tokens: maxTokens,
          stream,
          messages: [{ role: "user", content: "Tell me a long story." }],
        }),
      });

    // The prompt's size, from the same prompt asked by another key, once the worker's heartbeat is heard.
    const probeKey = await admin.createKey({ name: "probe" });
    for (let tries = 0; ; tries++) {
      const models = await fetch(`${gateway!.url}/v1/models`, { headers: { authorization: `Bearer ${probeKey.apiKey}` } });
      if ((await models.text()).includes(MODEL)) break;
      if (tries > 100) throw new Error(`the model was never listed\n${logs()}`);
      await sleep(100);
    }
    const probe = await chat(probeKey.apiKey, 1, false);
    expect(probe.status, logs()).toBe(200);
    const promptTokens = ((await probe.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;

    // A quota that one request's hold (prompt + max_tokens) nearly fills: a second is refused while it is held.
    const quota = promptTokens + MAX_TOKENS + 10;
    const created = await admin.createKey({ name: "killed", limits: { textQuotaTokens: BigInt(quota) } });
    const { apiKey } = created;
    const { keyId, accountId } = created.key!;
    const res = await chat(apiKey, MAX_TOKENS, true);
    expect(res.status, logs()).toBe(200);
    const reader = res.body!.getReader();
    let received = "";
    while (!/"content":"[^"]/.test(received)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before any content:\n${received}`);
      received += new TextDecoder().decode(value);
    }
    // Give the checkpoint (sent at most every second) a moment to be written.
    await sleep(1_200);
    expect(received).not.toMatch(/"finish_reason":"(stop|length)"/);
    const held = (await admin.getAccount({ accountId })).account!;
    expect(held.textReservedTokens).toBe(BigInt(promptTokens + MAX_TOKENS));
    const killedAt = Date.now();
    await gateway!.kill9();
    reader.cancel().catch(() => undefined);

    // The gateway's heartbeat expires (10 s), the sweep sees it gone twice, settles and releases.
    let account = held;
    while (account.textReservedTokens !== 0n || account.textUsedTokens === 0n) {
      if (Date.now() - killedAt > 60_000)
        throw new Error(`not swept within 60 s: ${JSON.stringify(account, (_, v) => (typeof v === "bigint" ? Number(v) : v))}\n${logs()}`);
      await sleep(500);
      account = (await admin.getAccount({ accountId })).account!;
    }
    const sweptAfterMs = Date.now() - killedAt;
    console.log(`swept ${sweptAfterMs} ms after the kill; charged ${account.textUsedTokens} (prompt ${promptTokens})`);
    expect(sweptAfterMs).toBeLessThan(60_000);

    const charged = Number(account.textUsedTokens);
    expect(charged).toBeGreaterThan(promptTokens);
    expect(charged).toBeLessThan(promptTokens + MAX_TOKENS);
    const { days } = await admin.getUsage({ keyId });
    const ledger = days.reduce((sum, d) => sum + Number(d.promptTokens + d.completionTokens), 0);
    const requests = days.reduce((sum, d) => sum + Number(d.requests), 0);
    expect(ledger).toBe(charged);
    expect(requests).toBe(1);
    expect(accounting!.output.join("\n")).toMatch(/"chargedCheckpoints":1/);

    // Exactly once: further passes change nothing.
    await sleep(2_500);
    const later = (await admin.getAccount({ accountId })).account!;
    expect(later.textUsedTokens).toBe(account.textUsedTokens);
    expect(later.textReservedTokens).toBe(0n);
  });
});
