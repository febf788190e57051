import { accounting } from "./accounting.js";
import { cluster } from "./cluster.js";
import { gateway, http } from "./gateway.js";
import { grammar } from "./grammar.js";
import { decoding, engine, images, limits } from "./inference.js";
import { hub, server, storage } from "./server.js";
import type { SectionValues, Setting } from "./setting.js";

// The settings table: every TESSERA_ variable of the server, by section. It is the only reader of
// the environment's TESSERA_ variables (test/docs/settings-only-reader.test.ts); `loadConfig`
// (../config.ts) parses it into a `Config`, docs/configuration.md is generated from it
// (`npm run docs:config`), and the Helm chart's values are checked against it.
//
// A new setting: one entry in the section whose consumer takes it, then the consumer reads
// `config.<section>.<key>`; the composition roots (bin/) already pass the section whole.

export const SECTIONS = { server, storage, hub, limits, images, engine, decoding, grammar, http, gateway, accounting, cluster };

export type SectionName = keyof typeof SECTIONS;

/** Every setting of a Tessera process, by section. Read once at start by `loadConfig`. */
export type Config = { [S in SectionName]: SectionValues<(typeof SECTIONS)[S]> };

/** One setting with the section and key it is read into. */
export interface ListedSetting extends Setting<unknown> {
  section: SectionName;
  key: string;
}

/** Every setting in the order of the sections, then of their entries. */
export const SETTINGS: readonly ListedSetting[] = (Object.keys(SECTIONS) as SectionName[]).flatMap((section) =>
  Object.entries(SECTIONS[section].settings).map(([key, setting]) => ({ ...(setting as Setting<unknown>), section, key })),
);

export type { ExecutionProvider } from "./inference.js";
export type { Setting } from "./setting.js";
