// The document's widest question (issue 22): one `choice` of 128 options, every third with a
// short description, on a short state, through the real decision and inference services; and a
// 16-token chat alone and sent while that decision runs (each generation step waits behind at
// most one forward of the decision). Run from bench/decision.ts.
import path from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { Role } from "../gen/tessera/inference/v1/inference_pb.js";
import { median, rssMiB } from "./decision/phases.js";
import { requestOf } from "./decision/questions.js";
import { openRig, type Rig } from "./decision/rig.js";

const STATE = "A customer writes: the parcel arrived two days late and the box was dented, but the support team replaced it at once.";
const CHAT_DELAY_MS = 200;

export interface WideDecisionResult {
  model: string;
  /** TESSERA_MAX_DECISION_ROW_TOKENS of the run ("default" when the engine's own). */
  rowTokens: string;
  inputTokens: number;
  /** The decision alone; undefined when refused. */
  decisionMs: number | undefined;
  refused: string | undefined;
  chatAloneMs: number;
  /** The chat sent CHAT_DELAY_MS after the decision started. */
  chatBehindMs: number | undefined;
  /** The decision while the chat ran beside it. */
  decisionWithChatMs: number | undefined;
  rssMiB: number;
}

function wideQuestion(): Record<string, unknown> {
  // About 1,650 tokens of question on the bundled model's tokenizer: more than one forward's 1,024.
  const criteria = Object.fromEntries(
    Array.from({ length: 128 }, (_, i) => [`the ${i}th category of message`, i % 3 === 0 ? `for example a late parcel, case ${i}` : null]),
  );
  return { wide: { type: "choice", instructions: "Which category fits this message best?", criteria } };
}

async function chat(rig: Rig): Promise<number> {
  const started = performance.now();
  const stream = rig.inference.generate({
    model: "bundled",
    messages: [{ role: Role.USER, content: [{ part: { case: "text", value: "Say hello." } }] }],
    options: { maxTokens: 16 },
  });
  for await (const _ of stream) void _;
  return performance.now() - started;
}

export async function benchWideDecision(modelDir: string, iterations: number, rowTokens?: number): Promise<WideDecisionResult> {
  const rig = await openRig(modelDir, rowTokens);
  try {
    const req = requestOf(STATE, wideQuestion());
    const result: WideDecisionResult = {
      model: path.basename(modelDir),
      rowTokens: rowTokens === undefined ? "default" : String(rowTokens),
      inputTokens: 0,
      decisionMs: undefined,
      refused: undefined,
      chatAloneMs: 0,
      chatBehindMs: undefined,
      decisionWithChatMs: undefined,
      rssMiB: 0,
    };
    for (let i = 0; i < 2; i++) await chat(rig);
    const alone: number[] = [];
    for (let i = 0; i < iterations; i++) alone.push(await chat(rig));
    result.chatAloneMs = median(alone);
    try {
      result.inputTokens = (await rig.decide(req)).inputTokens; // warm
    } catch (err) {
      result.refused = ConnectError.from(err).rawMessage;
      result.rssMiB = rssMiB();
      return result;
    }
    const decisions: number[] = [];
    const withChat: number[] = [];
    const behind: number[] = [];
    for (let i = 0; i < iterations; i++) {
      decisions.push((await rig.decide(req)).phases.total);
      const decision = rig.decide(req);
      await new Promise((r) => setTimeout(r, CHAT_DELAY_MS));
      behind.push(await chat(rig));
      withChat.push((await decision).phases.total);
    }
    result.decisionMs = median(decisions);
    result.decisionWithChatMs = median(withChat);
    result.chatBehindMs = median(behind);
    result.rssMiB = rssMiB();
    return result;
  } finally {
    await rig.pool.close();
  }
}

export function formatWideDecision(r: WideDecisionResult): string {
  const head = `widest question — ${r.model}: 1 choice of 128 options (every third described), row tokens ${r.rowTokens}`;
  if (r.refused !== undefined) {
    return [head, `  refused: ${r.refused.slice(0, 200)}`, `  16-token chat alone: ${r.chatAloneMs.toFixed(0)} ms median`].join("\n");
  }
  return [
    head,
    `  decision: ${r.decisionMs!.toFixed(0)} ms median alone, ${r.decisionWithChatMs!.toFixed(0)} ms with the chat beside it (${r.inputTokens} input tokens)`,
    `  16-token chat: ${r.chatAloneMs.toFixed(0)} ms median alone, ${r.chatBehindMs!.toFixed(0)} ms sent ${CHAT_DELAY_MS} ms into the decision`,
    `  resident memory ${r.rssMiB} MiB`,
  ].join("\n");
}
