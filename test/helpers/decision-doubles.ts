// Plain implementations of the decision service's dependencies, for tests and benchmarks that
// need the service without a real model: a registry with a fixed catalog and an inference
// service whose logits are a deterministic function of what the model would read.
import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { InferenceService, ScoreRequest } from "../../gen/tessera/inference/v1/inference_pb.js";
import { ModelKind, type RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";

export interface CatalogEntry {
  id: string;
  servingId: string;
  kind: ModelKind;
  aliases?: string[];
}

export const DEFAULT_CATALOG: CatalogEntry[] = [
  { id: "decisionmodel-0.1", servingId: "bundled", kind: ModelKind.DECISION, aliases: ["decisionmodel-latest", "jev-latest"] },
  { id: "textmodel-26b", servingId: "bundled", kind: ModelKind.TEXT },
];

export function fakeRegistry(catalog: CatalogEntry[] = DEFAULT_CATALOG): Partial<ServiceImpl<typeof RegistryService>> {
  return {
    resolveModel(req) {
      const entry = catalog.find((e) => e.id === req.model || e.aliases?.includes(req.model));
      if (entry === undefined) throw new ConnectError(`model "${req.model}" does not exist`, Code.NotFound);
      return {
        model: { id: entry.id, kind: entry.kind, servingId: entry.servingId },
        workers: [{ id: "w1", models: [entry.servingId], slotsTotal: 4, slotsFree: 4 }],
      };
    },
  };
}

export interface FakeInference {
  impl: Partial<ServiceImpl<typeof InferenceService>>;
  /** Every Score request received. */
  scoreCalls: ScoreRequest[];
  modelInfoCalls: number;
}

/**
 * Logits are a hash of (prefix, suffix, label), so an answer depends only on what the model
 * reads for that question. Tokens are counted as whitespace-separated words.
 */
export function fakeInference(
  decision: JsonObject | undefined,
  options: { maxPositions?: number; logitsFor?: (req: ScoreRequest, suffix: number) => number[] } = {},
): FakeInference {
  const fake: FakeInference = {
    scoreCalls: [],
    modelInfoCalls: 0,
    impl: {
      getModelInfo(req) {
        fake.modelInfoCalls++;
        return { model: req.model, maxPositions: options.maxPositions ?? 4096, blockSize: 64, decision };
      },
      score(req) {
        fake.scoreCalls.push(req);
        const prefixTokens = countTokens(req.prefix);
        const results = req.suffixes.map((s, i) => ({
          logits: options.logitsFor?.(req, i) ?? s.labels.map((label) => hashLogit(req.prefix, s.text, label)),
          suffixTokens: countTokens(s.text) + 1,
        }));
        return {
          results,
          prefixTokens,
          inputTokens: prefixTokens + results.reduce((n, r) => n + r.suffixTokens, 0),
        };
      },
    },
  };
  return fake;
}

export function hashLogit(...parts: string[]): number {
  const digest = createHash("sha256").update(parts.join("\u0000")).digest();
  return (digest.readUInt32BE(0) / 0xffffffff) * 10 - 5;
}

function countTokens(text: string): number {
  return text.split(/\s+/).filter((w) => w !== "").length;
}
