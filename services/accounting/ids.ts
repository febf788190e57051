import { hash, randomBytes } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

export const API_KEY_PREFIX = "tsr_";
/** 32 random bytes in base62 always take 43 characters (62^43 > 2^256). */
const SECRET_CHARS = 43;

/** Random base62 text of a given length, each character uniform (rejection sampling). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62]; // 248 = 4 * 62: keep the draw uniform
      if (out.length === length) break;
    }
  }
  return out;
}

function base62(bytes: Buffer, width: number): string {
  let n = BigInt(`0x${bytes.toString("hex")}`);
  let out = "";
  while (n > 0n) {
    out = BASE62[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out.padStart(width, "0");
}

/** A new secret: `tsr_` + 32 random bytes in base62. */
export function newApiKey(): string {
  return API_KEY_PREFIX + base62(randomBytes(32), SECRET_CHARS);
}

export const newKeyId = () => `key_${randomBase62(12)}`;
export const newAccountId = () => `acct_${randomBase62(12)}`;

/**
 * What is stored instead of a secret: its SHA-256, in hex. A plain SHA-256 suffices:
 * generated keys carry 256 random bits, so there is nothing to brute-force and no salt or
 * slow hash is needed. (`crypto.hash` is the one-shot form, several times faster than
 * `createHash` for inputs this short; it runs on every request.)
 */
export function hashApiKey(apiKey: string): string {
  return hash("sha256", apiKey, "hex");
}

/** Secrets we accept at all (generated ones, and bootstrap keys chosen by operators). */
const API_KEY_RE = /^tsr_[A-Za-z0-9._~-]{1,256}$/;
export const isWellFormedApiKey = (apiKey: string) => API_KEY_RE.test(apiKey);

/** Ids as stored: also safe as NATS KV key tokens. */
const ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
export const isWellFormedId = (id: string) => ID_RE.test(id);

/** A store key for a request id, whatever characters the caller put in it. */
export function requestKey(keyId: string, requestId: string): string {
  return hash("sha256", `${keyId}\n${requestId}`, "hex");
}
