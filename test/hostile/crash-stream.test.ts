// A stream that had delivered content when its process was killed (kill -9) is charged what it
// had delivered (issue 11, item 5): its checkpoint (gateway/checkpoints.ts) is settled by the
// store's recovery at the next start, and the ledger and the quota counters agree.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { accountFigures, createKey, ledgerTotals, startServe, writeCatalog } from "../helpers/hostile.js";
import { endlessTinyModel } from "../helpers/endless-model.js";

const scratch = mkdtempSync(join(tmpdir(), "tessera-crash-stream-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("a stream killed with its process", () => {
  it("is charged its prompt and the tokens it had delivered, after the restart", { timeout: 120_000 }, async () => {
    const dataDir = join(scratch, "data");
    const env = {
      TESSERA_DATA_DIR: dataDir,
      TESSERA_MODELS_CONFIG: writeCatalog(scratch, endlessTinyModel(scratch)),
      TESSERA_DEFAULT_RPM: "100000",
      TESSERA_LOG_LEVEL: "info",
      // One token per denoising step: a slower stream, surely still running when it is killed.
      TESSERA_UNMASK_POLICY: "threshold",
      TESSERA_UNMASK_THRESHOLD: "1",
    };
    const key = await createKey(dataDir, ["--text-quota", "100000000"]);
    const messages = [{ role: "user", content: "Tell me a long story." }];
    const serve = await startServe(env);
    let received = "";
    let promptTokens = 0;
    try {
      const res = await fetch(`${serve.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "textmodel-26b",
          max_tokens: 4096,
          stream: true,
          messages: [{ role: "user", content: "Tell me a long story." }],
        }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      // Read until some content has arrived, then give the checkpoint a moment to be written.
      while (!/"content":"[^"]/.test(received)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before any content:\n${received}`);
        received += new TextDecoder().decode(value);
      }
      await new Promise((r) => setTimeout(r, 1_200));
      expect(received).not.toMatch(/"finish_reason":"(stop|length)"/);
      serve.child.kill("SIGKILL");
      await serve.exited;
      reader.cancel().catch(() => undefined);
    } finally {
      serve.child.kill("SIGKILL");
    }
    // The restart recovers the store before it serves.
    const again = await startServe(env);
    try {
      // The stream was still running when it was killed: recovery charged its checkpoint.
      const recovered = again.lines.find((line) => line.includes("accounting recovered"));
      expect(recovered, again.lines.join("\n")).toMatch(/"chargedCheckpoints":1/);
      const account = await accountFigures(dataDir, key.accountId);
      const ledger = await ledgerTotals(dataDir, key.keyId);
      expect(account.textReserved).toBe(0);
      expect(account.textUsed).toBe(ledger.text);
      expect(ledger.requests).toBe(1);
      // The same prompt, asked again, says how many of those tokens were the prompt's.
      const probe = await fetch(`${again.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "textmodel-26b", max_tokens: 1, messages }),
      });
      promptTokens = ((await probe.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
      // The prompt and some completion; less than the whole max_tokens the request held.
      expect(account.textUsed).toBeGreaterThan(promptTokens);
      expect(account.textUsed).toBeLessThan(promptTokens + 1800);
    } finally {
      again.child.kill("SIGKILL");
      await again.exited;
    }
  });
});
