// The Hugging Face variables, read as huggingface_hub reads them.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { hubEnv } from "../../lib/hub/env.js";

describe("hubEnv", () => {
  const home = mkdtempSync(join(tmpdir(), "tessera-hf-home-"));
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("defaults: huggingface.co, ~/.cache/huggingface/hub, online", () => {
    expect(hubEnv({})).toMatchObject({
      endpoint: "https://huggingface.co",
      cacheDir: join(homedir(), ".cache/huggingface/hub"),
      offline: false,
    });
  });

  it("HF_HUB_CACHE over HF_HOME/hub over XDG_CACHE_HOME; HF_ENDPOINT without its trailing slash; HF_HUB_OFFLINE's true values", () => {
    expect(hubEnv({ XDG_CACHE_HOME: "/x" }).cacheDir).toBe("/x/huggingface/hub");
    expect(hubEnv({ XDG_CACHE_HOME: "/x", HF_HOME: "/h" }).cacheDir).toBe("/h/hub");
    expect(hubEnv({ HF_HOME: "/h", HF_HUB_CACHE: "/c" }).cacheDir).toBe("/c");
    expect(hubEnv({ HF_ENDPOINT: "https://hf-mirror.com/" }).endpoint).toBe("https://hf-mirror.com");
    for (const v of ["1", "ON", "yes", "true"]) expect(hubEnv({ HF_HOME: home, HF_HUB_OFFLINE: v }).offline).toBe(true);
    for (const v of ["0", "", "off"]) expect(hubEnv({ HF_HOME: home, HF_HUB_OFFLINE: v }).offline).toBe(false);
  });

  it("HF_TOKEN, else the token huggingface-cli login saved in HF_HOME", () => {
    expect(hubEnv({ HF_HOME: home }).token).toBeUndefined();
    writeFileSync(join(home, "token"), "hf_saved_by_login\n");
    expect(hubEnv({ HF_HOME: home }).token).toBe("hf_saved_by_login");
    expect(hubEnv({ HF_HOME: home, HF_TOKEN: "hf_from_env" }).token).toBe("hf_from_env");
  });
});
