import { join } from "node:path";

/** The environment of a `tessera` run against the Hub double: a cache and data directory in `scratch`, no token, no Python. */
export function hubTestEnv(scratch: string, hubUrl: string): Record<string, string> {
  return {
    HF_ENDPOINT: hubUrl,
    HF_HOME: join(scratch, "hf"),
    HF_TOKEN: "",
    HF_HUB_OFFLINE: "",
    TESSERA_DATA_DIR: join(scratch, "data"),
    TESSERA_CONVERT_PYTHON: join(scratch, "no-python-here"),
  };
}
