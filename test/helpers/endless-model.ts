import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TINY_MODEL_DIR } from "./tessera.js";

/**
 * A copy of the tiny model under `dir`, except that the end of turn it learned (token 549) is
 * an ordinary special token to the server (549 and 550 swap names): it talks until max_tokens,
 * so that its stream is still running when its process is killed.
 */
export function endlessTinyModel(dir: string): string {
  const modelDir = join(dir, "endless-model");
  cpSync(TINY_MODEL_DIR, modelDir, { recursive: true });
  const config = JSON.parse(readFileSync(join(modelDir, "config.json"), "utf8")) as { eos_token_id: number };
  config.eos_token_id = 550;
  writeFileSync(join(modelDir, "config.json"), JSON.stringify(config));
  const tokenizer = readFileSync(join(modelDir, "tokenizer.json"), "utf8")
    .replaceAll("<|im_end|>", "<|swap|>")
    .replaceAll("<|endoftext|>", "<|im_end|>")
    .replaceAll("<|swap|>", "<|endoftext|>");
  writeFileSync(join(modelDir, "tokenizer.json"), tokenizer);
  return modelDir;
}
