import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/tessera.js";
import { runConvertPython } from "./converted-models.js";

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
  };
}

/**
 * The tiny DiffusionGemma checkpoint (made by transformers' own classes) and its fp32
 * conversion, built once per process into a scratch directory under .cache/.
 */
let pending: Promise<DiffusionGemmaFixture> | undefined;
export function diffusionGemmaFixture(): Promise<DiffusionGemmaFixture> {
  pending ??= build();
  return pending;
}

async function build(): Promise<DiffusionGemmaFixture> {
  const root = join(REPO_ROOT, ".cache/diffusion-gemma", `${process.pid}-${Date.now()}`);
  const building = `${root}.building`;
  mkdirSync(building, { recursive: true });
  try {
    await runConvertPython(["convert/make_tiny_diffusion_gemma.py", join(building, "ckpt")]);
    const { stdout } = await runConvertPython(["-m", "tessera_convert", join(building, "ckpt/diffusion_gemma"), join(building, "model")]);
    renameSync(building, root);
    const summary = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as DiffusionGemmaFixture["summary"];
    return { checkpoint: join(root, "ckpt/diffusion_gemma"), model: join(root, "model"), summary };
  } catch (err) {
    rmSync(building, { recursive: true, force: true });
    throw err;
  }
}

/** Removes a fixture built by this process. */
export function removeDiffusionGemmaFixture(fx: DiffusionGemmaFixture): void {
  const root = join(fx.model, "..");
  if (existsSync(root)) rmSync(root, { recursive: true, force: true });
}
