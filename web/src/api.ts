import { apiErrorFrom, networkError } from "./api-error.js";
import type { KeyStore } from "./key-store.js";

/** Calls of the page to its own server (same origin, relative paths), with the key. */
export class Api {
  constructor(private readonly keys: KeyStore) {}

  /** A response that is ok (2xx), or an ApiError as the server sent it. */
  async request(path: string, init: { method?: "GET" | "POST"; body?: unknown; signal?: AbortSignal } = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: "application/json, text/event-stream" };
    const key = this.keys.key;
    if (key !== "") headers["authorization"] = `Bearer ${key}`;
    if (init.body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await fetch(path, {
        method: init.method ?? "GET",
        headers,
        ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
        ...(init.signal !== undefined ? { signal: init.signal } : {}),
        credentials: "omit",
        cache: "no-store",
      });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw networkError(err);
    }
    if (!res.ok) throw apiErrorFrom(res.status, await res.text(), res.headers);
    return res;
  }

  async json<T>(path: string, init: { method?: "GET" | "POST"; body?: unknown; signal?: AbortSignal } = {}) {
    const res = await this.request(path, init);
    const body = (await res.json()) as T;
    return { body, requestId: res.headers.get("x-service-request-id") ?? "" };
  }
}
