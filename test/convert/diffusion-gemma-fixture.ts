import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/tessera.js";
import { runConvertPython, sourcesHash } from "../helpers/converted-models.js";

export interface DiffusionGemmaFixture {
  checkpoint: string;
  model: string;
  /** The summary line `tessera convert` printed for the fp32 conversion. */
  summary: {
    check: Record<string, number>;
    onnx_bytes: number;
    weights_bytes: number;
    weights_bytes_unshared: number;
    weights: string;
    family: string;
    /** The experts' formulation the converter chose ("dense" or "sparse"). */
    experts: string;
  };
}

/** make_tiny_diffusion_gemma.py's text layer patterns (its LAYER_PATTERNS); the fixture's is "alternating". */
export type TinyLayerPattern = "alternating" | "default" | "full";

/**
 * The tiny DiffusionGemma checkpoint (made by transformers' own classes) and its fp32
 * conversion, built once per version of convert/ into .cache/diffusion-gemma/<hash> (test
 * files share it; a directory appears only complete, by rename). Another `pattern` of layer
 * types is built beside it, in <hash>-<pattern>, and converted with `extraArgs`.
 */
export async function diffusionGemmaFixture(
  pattern: TinyLayerPattern = "alternating",
  extraArgs: readonly string[] = [],
): Promise<DiffusionGemmaFixture> {
  const root = join(REPO_ROOT, ".cache/diffusion-gemma", sourcesHash() + (pattern === "alternating" ? "" : `-${pattern}`));
  const layout = (summary: DiffusionGemmaFixture["summary"]) => ({
    checkpoint: join(root, "ckpt/diffusion_gemma"),
    model: join(root, "model"),
    summary,
  });
  const summaryFile = join(root, "summary.json");
  if (existsSync(summaryFile)) return layout(JSON.parse(readFileSync(summaryFile, "utf8")));
  const lock = `${root}.lock`;
  try {
    mkdirSync(join(REPO_ROOT, ".cache/diffusion-gemma"), { recursive: true });
    mkdirSync(lock);
  } catch {
    const deadline = Date.now() + 600_000;
    while (!existsSync(summaryFile)) {
      if (!existsSync(lock)) return diffusionGemmaFixture(pattern, extraArgs); // the builder failed: try ourselves
      if (Date.now() > deadline) throw new Error(`${lock}: another test file has been building for 10 minutes`);
      await new Promise((r) => setTimeout(r, 500));
    }
    return layout(JSON.parse(readFileSync(summaryFile, "utf8")));
  }
  const building = `${root}.building-${process.pid}`;
  try {
    rmSync(building, { recursive: true, force: true });
    mkdirSync(building, { recursive: true });
    await runConvertPython(["convert/make_tiny_diffusion_gemma.py", join(building, "ckpt"), pattern]);
    const { stdout } = await runConvertPython([
      "-m",
      "tessera_convert",
      join(building, "ckpt/diffusion_gemma"),
      join(building, "model"),
      ...extraArgs,
    ]);
    writeFileSync(join(building, "summary.json"), stdout.trim().split("\n").at(-1) ?? "{}");
    renameSync(building, root);
  } finally {
    rmSync(building, { recursive: true, force: true });
    rmSync(lock, { recursive: true, force: true });
  }
  return layout(JSON.parse(readFileSync(summaryFile, "utf8")));
}
