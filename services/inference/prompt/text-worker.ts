// The text worker thread: renders chat templates and tokenizes prompts and decision states off
// the main thread (the tokenizer is pure JavaScript: about 1 µs of CPU per character). The main
// side is model-text.ts.
import { parentPort, workerData } from "node:worker_threads";
import { TemplateRenderError, textOpsOf, type TextOps, type TextSource } from "./text-ops.js";

export const TEXT_WORKER_MARK = "tessera-text-worker";

export type TextRequest =
  | { id: number; op: "encode"; text: string }
  | { id: number; op: "encodePrompt"; text: string }
  | { id: number; op: "renderEncode"; variables: unknown }
  | { id: number; op: "scoreTokens"; prefix: string; suffixes: string[]; labels: string[] };

export type TextReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; template: boolean; message: string };

type Data = { mark: string; source: TextSource };

function answer(ops: TextOps, req: TextRequest): unknown {
  switch (req.op) {
    case "encode":
      return ops.encode(req.text);
    case "encodePrompt":
      return ops.encodePrompt(req.text);
    case "renderEncode":
      return ops.renderEncode(req.variables as Parameters<TextOps["renderEncode"]>[0]);
    case "scoreTokens":
      return ops.scoreTokens(req.prefix, req.suffixes, req.labels);
  }
}

const data = workerData as Data | undefined;
if (parentPort !== null && data?.mark === TEXT_WORKER_MARK) {
  const port = parentPort;
  const ops = textOpsOf(data.source);
  port.on("message", (req: TextRequest) => {
    let reply: TextReply;
    try {
      reply = { id: req.id, ok: true, value: answer(ops, req) };
    } catch (err) {
      reply = {
        id: req.id,
        ok: false,
        template: err instanceof TemplateRenderError,
        message: err instanceof Error ? err.message : String(err),
      };
    }
    port.postMessage(reply);
  });
}
