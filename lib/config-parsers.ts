import { isAbsolute, resolve } from "node:path";

// The parsers of settings' values (config-settings/): each turns the raw text into the value
// or throws an Error whose message says what is wrong.

export function integer(min: number, max: number) {
  return (raw: string): number => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be an integer, got "${raw}"`);
    const n = Number(raw);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}, got ${n}`);
    return n;
  };
}

export const path = (raw: string, baseDir: string) => {
  if (raw.trim() === "") throw new Error("must not be empty");
  return isAbsolute(raw) ? raw : resolve(baseDir, raw);
};

export const optional = (raw: string) => (raw.trim() === "" ? undefined : raw.trim());

/** One http(s) base URL, without a trailing slash. */
export function baseUrl(raw: string): string {
  const text = raw.trim();
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`must be an http:// or https:// URL, got "${raw}"`);
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
    throw new Error(`must be an http:// or https:// URL, got "${raw}"`);
  }
  if (url.search !== "" || url.hash !== "") throw new Error(`must not carry a query or fragment, got "${raw}"`);
  return text.replace(/\/+$/, "");
}

/** Comma-separated base URLs (several replicas of one service); empty means none. */
export const urlList = (raw: string): string[] =>
  raw
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "")
    .map(baseUrl);

/** TESSERA_CORS_ORIGINS: comma-separated origins (scheme://host[:port]) or `*`. */
export function parseCorsOrigins(raw: string): string[] {
  const origins = raw
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "");
  for (const origin of origins) {
    if (origin === "*") continue;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      throw new Error(`must be origins like https://app.example.com or *, got "${origin}"`);
    }
    if (url.origin !== origin)
      throw new Error(`"${origin}" is not an origin (scheme://host[:port], no path or slash); did you mean "${url.origin}"?`);
  }
  return origins;
}

/** A bearer credential: unset when empty; long enough not to be guessed; one token. */
export const token = (raw: string): string | undefined => {
  const value = raw.trim();
  if (value === "") return undefined;
  if (value.length < 16) throw new Error("must be at least 16 characters");
  if (value.length > 1024 || !/^[\x21-\x7e]+$/.test(value)) throw new Error("must be 16-1024 printable ASCII characters without spaces");
  return value;
};

/** on/off (also 1/0, true/false, yes/no). */
export function onOff(raw: string): boolean {
  const value = raw.trim().toLowerCase();
  if (["on", "1", "true", "yes"].includes(value)) return true;
  if (["off", "0", "false", "no"].includes(value)) return false;
  throw new Error("must be on or off");
}
