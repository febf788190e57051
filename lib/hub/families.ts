// Which repositories a pull takes, read from config.json before any weight byte is fetched.
// The converter's families: convert/tessera_convert/families.py FAMILIES is the table of record;
// CONVERTIBLE is its copy as `python -m tessera_convert --families` prints it (key, model_type,
// family, label), keyed by model_type lower-cased as the converter looks them up.
// test/hub/families.test.ts fails when the two differ.

export interface HubFamily {
  /** config.json's spelling, for messages. */
  modelType: string;
  /** The family name a converted model directory carries (and the catalog's `family`). */
  family: string;
  label: string;
}

export const CONVERTIBLE: Readonly<Record<string, HubFamily>> = {
  sdar: { modelType: "sdar", family: "sdar", label: "SDAR" },
  fast_dllm_qwen: { modelType: "Fast_dLLM_Qwen", family: "fast_dllm_v2", label: "Fast-dLLM v2" },
  qwen3: { modelType: "qwen3", family: "qwen3", label: "Qwen3" },
  qwen2: { modelType: "qwen2", family: "qwen2", label: "Qwen2 / Qwen2.5" },
  diffusion_gemma: { modelType: "diffusion_gemma", family: "diffusion_gemma", label: "DiffusionGemma" },
};

export type RepoKind = { kind: "tessera"; family: string } | { kind: "checkpoint"; family: HubFamily };

/** A Tessera model directory (docs/model-contract.md): contract v1's model_type or a contract_version. */
export function isTesseraModel(config: Record<string, unknown>): boolean {
  return config["model_type"] === "tessera-block-diffusion" || typeof config["contract_version"] === "number";
}

/** What a repository's config.json makes it, or undefined when the converter does not take it. */
export function repoKind(config: Record<string, unknown>): RepoKind | undefined {
  const type = config["model_type"];
  if (isTesseraModel(config)) return { kind: "tessera", family: typeof type === "string" ? type : "tessera" };
  const family = typeof type === "string" ? CONVERTIBLE[type.toLowerCase()] : undefined;
  return family === undefined ? undefined : { kind: "checkpoint", family };
}

export function supportedList(): string {
  return Object.values(CONVERTIBLE)
    .map((f) => `"${f.modelType}" (${f.label})`)
    .join(", ");
}
