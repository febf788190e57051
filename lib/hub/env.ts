import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

// The Hugging Face client variables, read as huggingface_hub reads them, so that Tessera,
// huggingface-cli, transformers and vLLM share one cache and one login.

export const DEFAULT_ENDPOINT = "https://huggingface.co";

export interface HubEnv {
  /** HF_ENDPOINT (a mirror), without a trailing slash. */
  endpoint: string;
  /** HF_TOKEN, else the file `huggingface-cli login` writes (HF_TOKEN_PATH, default $HF_HOME/token). */
  token: string | undefined;
  /** HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. */
  cacheDir: string;
  /** HF_HUB_OFFLINE=1: not a single request; the cache only. */
  offline: boolean;
}

const TRUE = new Set(["1", "on", "yes", "true"]);

export function hubEnv(env: NodeJS.ProcessEnv = process.env): HubEnv {
  const home = env["HF_HOME"] ?? join(env["XDG_CACHE_HOME"] ?? join(homedir(), ".cache"), "huggingface");
  const cacheDir = env["HF_HUB_CACHE"] ?? env["HUGGINGFACE_HUB_CACHE"] ?? join(home, "hub");
  const endpoint = (env["HF_ENDPOINT"]?.trim() || DEFAULT_ENDPOINT).replace(/\/+$/, "");
  let token = env["HF_TOKEN"]?.trim() || env["HUGGING_FACE_HUB_TOKEN"]?.trim() || undefined;
  if (token === undefined) {
    const file = env["HF_TOKEN_PATH"] ?? join(home, "token");
    if (existsSync(file)) token = readFileSync(file, "utf8").trim() || undefined;
  }
  return { endpoint, token, cacheDir, offline: TRUE.has((env["HF_HUB_OFFLINE"] ?? "").trim().toLowerCase()) };
}
