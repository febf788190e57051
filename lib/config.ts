import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type Config, SETTINGS, type SectionName } from "./config-settings/index.js";

export { SETTINGS };
export type { Config, ExecutionProvider } from "./config-settings/index.js";

/** The file named by TESSERA_CONFIG: a JSON object keyed by the same names as the environment. */
export const CONFIG_FILE_ENV = "TESSERA_CONFIG";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths given in the environment; the process's working directory. */
  cwd?: string;
}

/**
 * Reads every setting from the environment, then from the optional JSON file named by
 * TESSERA_CONFIG (relative paths in it are relative to the file), then the defaults.
 * Throws a ConfigError listing every problem at once.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const problems: string[] = [];
  let file: Record<string, unknown> = {};
  let fileDir = cwd;

  const filePath = env[CONFIG_FILE_ENV]?.trim();
  if (filePath) {
    const abs = resolve(cwd, filePath);
    fileDir = dirname(abs);
    try {
      const parsed: unknown = JSON.parse(readFileSync(abs, "utf8"));
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        problems.push(`${CONFIG_FILE_ENV} (${abs}): must hold a JSON object`);
      } else {
        file = parsed as Record<string, unknown>;
        const known = new Set(SETTINGS.map((s) => s.env));
        for (const name of Object.keys(file)) {
          if (!known.has(name)) problems.push(`${CONFIG_FILE_ENV} (${abs}): unknown setting "${name}"`);
        }
      }
    } catch (err) {
      problems.push(`${CONFIG_FILE_ENV} (${abs}): ${(err as Error).message}`);
    }
  }

  const config = Object.fromEntries(SETTINGS.map((s) => [s.section, {}])) as Record<SectionName, Record<string, unknown>>;
  for (const setting of SETTINGS) {
    let raw: string | undefined;
    let base = cwd;
    let source = "environment";
    if (env[setting.env] !== undefined) {
      raw = env[setting.env];
    } else if (Object.hasOwn(file, setting.env)) {
      const value = file[setting.env];
      raw = Array.isArray(value) ? value.join(",") : value === null ? "" : String(value);
      base = fileDir;
      source = CONFIG_FILE_ENV;
    } else {
      raw = setting.fallback;
      source = "default";
    }
    if (raw === undefined) {
      config[setting.section][setting.key] = undefined;
      continue;
    }
    try {
      config[setting.section][setting.key] = setting.parse(raw, base);
    } catch (err) {
      problems.push(`${setting.env} (${source}): ${(err as Error).message}`);
    }
  }
  const { headersTimeoutMs, requestTimeoutMs } = config.http;
  if (typeof headersTimeoutMs === "number" && typeof requestTimeoutMs === "number" && requestTimeoutMs < headersTimeoutMs) {
    problems.push(`TESSERA_BODY_TIMEOUT_MS (${requestTimeoutMs}) must be at least TESSERA_HEADERS_TIMEOUT_MS (${headersTimeoutMs})`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config as unknown as Config;
}

function listed<S extends SectionName>(section: S, key: keyof Config[S] & string) {
  const setting = SETTINGS.find((s) => s.section === section && s.key === key);
  if (setting === undefined) throw new Error(`no setting ${section}.${key}`);
  return setting;
}

/**
 * One setting from the environment alone (no TESSERA_CONFIG file), else its default: for what
 * is process-wide before any configuration is handed down (onnx-session.ts's worker default).
 */
export function readSetting<S extends SectionName, K extends keyof Config[S] & string>(
  section: S,
  key: K,
  env: NodeJS.ProcessEnv = process.env,
): Config[S][K] {
  const setting = listed(section, key);
  const raw = env[setting.env] ?? setting.fallback;
  if (raw === undefined) return undefined as Config[S][K];
  try {
    return setting.parse(raw, process.cwd()) as Config[S][K];
  } catch (err) {
    throw new ConfigError([`${setting.env} (${env[setting.env] === undefined ? "default" : "environment"}): ${(err as Error).message}`]);
  }
}

/** Whether the environment gives this setting (rather than leaving it to its default). */
export function settingInEnvironment<S extends SectionName>(
  section: S,
  key: keyof Config[S] & string,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  return env[listed(section, key).env] !== undefined;
}

/** The settings as `--help` prints them: name, default, meaning. */
export function settingsHelp(): string {
  const width = Math.max(...SETTINGS.map((s) => s.env.length), CONFIG_FILE_ENV.length);
  const lines = [
    `  ${CONFIG_FILE_ENV.padEnd(width)}  JSON file with any of the settings below, keyed by the same names (the environment wins).`,
    ...SETTINGS.map(
      (s) => `  ${s.env.padEnd(width)}  ${s.help}${s.fallback === undefined || s.fallback === "" ? "" : ` [default: ${s.fallback}]`}`,
    ),
  ];
  return lines.join("\n");
}
