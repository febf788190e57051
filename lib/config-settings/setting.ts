// The shape of the settings table (index.ts): every setting is one entry of a section, and the
// type of `Config` is derived from the entries, so a new setting is one entry plus its consumer.

/** One setting: its variable, default, help line and parser. `loadConfig` (../config.ts) reads them. */
export interface Setting<T> {
  env: string;
  /** The default as the help shows it; undefined means unset. */
  fallback: string | undefined;
  /** The default as docs/configuration.md shows it, where `fallback` depends on the machine. */
  documentedDefault?: string;
  help: string;
  /** Turns the raw text into the value or throws an Error whose message says what is wrong. */
  parse: (raw: string, baseDir: string) => T;
}

export interface Section<S extends Record<string, Setting<unknown>>> {
  /** The heading of the section in docs/configuration.md. */
  title: string;
  description: string;
  settings: S;
}

/** A section of settings: what one consumer (a listener, the model pool, accounting…) is given whole. */
export function section<S extends Record<string, Setting<unknown>>>(title: string, description: string, settings: S): Section<S> {
  return { title, description, settings };
}

/** The values a section's settings parse to, keyed as the section names them. */
export type SectionValues<S> = S extends Section<infer Settings> ? { [K in keyof Settings]: ReturnType<Settings[K]["parse"]> } : never;
